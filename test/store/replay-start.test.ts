// npm test: alone (it bounds wall-clock times, which another file run beside it would stretch).
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { performance } from 'node:perf_hooks'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { sleep, spawnService } from '../helpers/child.js'
import { assertProblem, request } from '../helpers/http.js'
import { writeLongTail } from '../helpers/long-log.js'
import { readRssMb, sampleRss } from '../helpers/proc-stats.js'
import { type Later, makeWorld } from '../helpers/tmpfs-world.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()
const EVENTS = 150_000
/**
 * One request of this test process's own HTTP client to a throwaway server, so that the first
 * probe does not time the client's loading (fetch loads and compiles undici on first use: 40 ms
 * here, over 100 ms under coverage on a busy machine), which has nothing to do with the replay.
 */
async function warmClient(): Promise<void> {
  const server = createServer((_req, res) => res.end('ok'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const { port } = server.address() as AddressInfo
    const res = await request('GET', `http://127.0.0.1:${port}/`)
    assert.equal(res.text, 'ok')
  } finally {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

/**
 * Starts the service on `dataDir` and probes it every 20 ms until /readyz is 200: the slowest
 * /healthz answer, how many /readyz answers were 503, the peak RSS above the RSS at listening.
 */
async function startWatched(
  dataDir: string,
  later: Later,
): Promise<{ url: string; slowestHealthMs: number; notReady: number; rssGrowthMb: number }> {
  await warmClient()
  const child = spawnService({ dataDir })
  later(async () => {
    child.proc.kill('SIGKILL')
    await child.exited
  })
  let url: string | undefined
  const deadline = Date.now() + 60_000
  while (url === undefined) {
    url = /"msg":"listening","url":"([^"]+)"/.exec(child.stdout())?.[1]
    if (child.proc.exitCode !== null || Date.now() > deadline)
      throw new Error(`the service did not start:\n${child.stderr()}`)
    await sleep(5)
  }
  const pid = child.proc.pid ?? 0
  const atListening = readRssMb(pid)
  const rss = sampleRss(pid, 20)
  let slowestHealthMs = 0
  let notReady = 0
  for (;;) {
    const started = performance.now()
    const health = await request('GET', `${url}/healthz`)
    const took = performance.now() - started
    slowestHealthMs = Math.max(slowestHealthMs, took)
    assert.equal(health.status, 200, health.text)
    const ready = await request('GET', `${url}/readyz`)
    if (ready.status === 200) break
    assertProblem(ready, 503, 'starting')
    assert.match(ready.headers.get('retry-after') ?? '', /^\d+$/)
    notReady += 1
    if (Date.now() > deadline) throw new Error(`never ready:\n${child.stderr()}`)
    await sleep(20)
  }
  return { url, slowestHealthMs, notReady, rssGrowthMb: rss.stop() - atListening }
}

/** Every user as GET shows it: each at its last event's version and name. */
async function assertUsers(url: string, last: Map<string, User>): Promise<void> {
  let shown = 0
  let cursor: string | null = null
  do {
    const query: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`
    const res = await request('GET', `${url}/users?limit=100${query}`, { token })
    assert.equal(res.status, 200, res.text)
    const page = res.json<{ items: User[]; nextCursor: string | null }>()
    for (const user of page.items) {
      const expected = last.get(user.id)
      assert.deepEqual([user.name, user.version], [expected?.name, expected?.version])
      shown += 1
    }
    cursor = page.nextCursor
  } while (cursor !== null)
  assert.equal(shown, last.size, 'every user of the log')
}

describe('start-up with a long log', () => {
  it(`replays a tail of ${EVENTS} events past the checkpoint with /healthz answering throughout, /readyz 503 until done, and RSS bounded`, {
    timeout: 180_000,
  }, async (t) => {
    const { dataDir, later } = await makeWorld(t, 'replay-start-')
    const last = writeLongTail(dataDir, 'zero', EVENTS)
    const watched = await startWatched(dataDir, later)
    t.diagnostic(JSON.stringify(watched))
    assert.ok(watched.notReady > 0, '/readyz said 503 while the log was replayed')
    assert.ok(watched.slowestHealthMs < 200, `/healthz took ${watched.slowestHealthMs} ms`)
    assert.ok(watched.rssGrowthMb < 100, `RSS grew by ${watched.rssGrowthMb} MB`)
    await assertUsers(watched.url, last)
  })

  for (const checkpoint of ['none', 'torn'] as const) {
    it(`reads the whole log streamed when checkpoint.json is ${checkpoint === 'none' ? 'missing (nothing to replay)' : 'torn (everything replayed)'}`, {
      timeout: 180_000,
    }, async (t) => {
      const { dataDir, later } = await makeWorld(t, 'replay-start-')
      const last = writeLongTail(dataDir, checkpoint, EVENTS)
      const watched = await startWatched(dataDir, later)
      t.diagnostic(JSON.stringify(watched))
      assert.ok(watched.slowestHealthMs < 200, `/healthz took ${watched.slowestHealthMs} ms`)
      assert.ok(watched.rssGrowthMb < 100, `RSS grew by ${watched.rssGrowthMb} MB`)
      await assertUsers(watched.url, last)
    })
  }
})
