import assert from 'node:assert/strict'
import type { Socket } from 'node:net'
import { describe, it, type TestContext } from 'node:test'

import { type RunningChild, sleep, startChild } from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { freshDatabase, SKIP_POSTGRES } from '../helpers/postgres.js'
import { openSocket } from '../helpers/raw-exchange.js'
import { makeTempDir } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { residentBytes, writeLargeFeed } from './event-feed-fixtures.js'

const admin = makeToken()
const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })

/** Streams that never read, over a feed of 300 events of about 33 KB (10 MB). */
const STREAMS = 60
const PATCHES = 300
/**
 * What each stream may cost: its buffer bound (1 MiB of frames) and the garbage of the pages read
 * to fill the kernel's socket buffers, which the heap keeps for a while: 3-3.6 MB each, measured
 * on both stores with pages bounded in bytes. The old code wrote pages of 200 events (6.6 MB)
 * whatever the bound: over 10 MB each on the file store, more on PostgreSQL.
 */
const PER_STREAM_BYTES = 6 * 1024 * 1024
/** The service cuts off a stream that takes nothing for this long. */
const STALL_MS = 10_000

async function openStreams(url: string): Promise<number> {
  const text = (await request('GET', `${url}/metrics`)).text
  return Number(/^user_service_event_streams (\d+)$/m.exec(text)?.[1] ?? 'NaN')
}

/** Opens a stream on a raw socket that never reads a byte of the answer. */
async function openIdleStream(t: TestContext, url: string): Promise<Socket> {
  const socket = await openSocket(url)
  t.after(() => {
    socket.destroy()
  })
  socket.pause()
  socket.on('error', () => undefined)
  socket.write(
    `GET /events HTTP/1.1\r\nhost: localhost\r\naccept: text/event-stream\r\nauthorization: Bearer ${reader}\r\n\r\n`,
  )
  return socket
}

interface Measured {
  /** RSS with the feed written, before any stream. */
  readonly before: number
  /** The highest RSS from the first stream until 3 s after the last one opened. */
  readonly peak: number
  /** Streams open at the end. */
  readonly opened: number
}

async function measureIdleStreams(t: TestContext, child: RunningChild): Promise<Measured> {
  const pid = child.proc.pid
  if (pid === undefined) throw new Error('the service has no pid')
  await writeLargeFeed(child.url, admin, PATCHES)
  const before = await residentBytes(pid)
  let peak = before
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      const rss = await residentBytes(pid)
      peak = Math.max(peak, rss)
      await sleep(50)
    }
  })()
  const firstOpened = Date.now()
  for (let i = 0; i < STREAMS; i += 1) await openIdleStream(t, child.url)
  const deadline = Date.now() + 10_000
  while ((await openStreams(child.url)) < STREAMS && Date.now() < deadline) await sleep(50)
  // Time for every stream to fill the kernel's buffers and its own, but not past the stall
  // cut-off (10 s) of the first: on a loaded machine opening them all may take seconds.
  await sleep(Math.max(0, Math.min(3000, firstOpened + STALL_MS - 1000 - Date.now())))
  const opened = await openStreams(child.url)
  sampling = false
  await sampler
  return { before, peak, opened }
}

function assertBounded({ before, peak, opened }: Measured): void {
  const mb = (bytes: number): string => `${Math.round(bytes / 1e6)} MB`
  assert.ok(
    peak - before < STREAMS * PER_STREAM_BYTES,
    `${STREAMS} streams that do not read took RSS from ${mb(before)} to ${mb(peak)}: more than ${mb(PER_STREAM_BYTES)} each`,
  )
  // None was cut off early: each was measured holding what it may hold (before the stall cut-off).
  assert.equal(opened, STREAMS)
}

describe('SSE streams that do not read: memory stays bounded (§9, §10)', () => {
  it('on the file store, each costs about its buffer bound, not a page of 200 events', {
    timeout: 60_000,
  }, async (t) => {
    const child = await startChild({
      dataDir: await makeTempDir(t),
      env: { MAX_EVENT_STREAMS: String(STREAMS) },
    })
    t.after(() => child.stop('SIGKILL'))
    assertBounded(await measureIdleStreams(t, child))
  })

  it('on PostgreSQL, each costs about its buffer bound, not a page of 200 events', {
    skip: SKIP_POSTGRES,
    timeout: 60_000,
  }, async (t) => {
    const databaseUrl = await freshDatabase(t)
    const child = await startChild({
      dataDir: await makeTempDir(t),
      env: { MAX_EVENT_STREAMS: String(STREAMS), DATABASE_URL: databaseUrl },
    })
    t.after(() => child.stop('SIGKILL'))
    assertBounded(await measureIdleStreams(t, child))
  })
})
