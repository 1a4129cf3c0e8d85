import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'

import { EVENT_PAGE_MAX_BYTES } from '../../src/store/event-feed.js'
import { startChild } from '../helpers/child.js'
import { request, type TestResponse } from '../helpers/http.js'
import { freshDatabase, SKIP_POSTGRES } from '../helpers/postgres.js'
import { makeTempDir } from '../helpers/service.js'
import {
  createBigUser,
  type FeedPage,
  feedReader,
  memoryOf,
  pageBytes,
  patchMetadata,
  readWholeFeed,
} from './feed-fixtures.js'

/** Writers at once, each patching its own user (the per-user queue would serialise one user). */
const WRITERS = 8
/** Patches after the warm-up: each appends an event of about 50 KB (33 KB of metadata in memory). */
const PATCHES = 3200
/** The child's old-space limit: the service's own working set fits, 100 MB of event bodies do not. */
const HEAP_MB = 96

async function patchAll(
  url: string,
  users: readonly string[],
  rounds: number,
  tag: string,
): Promise<void> {
  await Promise.all(
    users.map(async (id) => {
      for (let round = 0; round < rounds; round += 1) await patchMetadata(url, id, `${tag}${round}`)
    }),
  )
}

/** Eight pages of limit=1000 at once, as the review sent them. */
function eightPages(url: string): Promise<TestResponse[]> {
  return Promise.all(
    Array.from({ length: 8 }, () =>
      request('GET', `${url}/events?limit=1000`, { token: feedReader }),
    ),
  )
}

/** Each page within the byte bound, short, and resuming after its last event. */
function checkPages(pages: readonly TestResponse[]): void {
  for (const res of pages) {
    assert.equal(res.status, 200, res.text.slice(0, 300))
    const page = res.json<FeedPage>()
    assert.ok(
      page.items.length >= 1 && page.items.length < 1000,
      `a page of ${page.items.length} events`,
    )
    assert.ok(pageBytes(res) <= EVENT_PAGE_MAX_BYTES, `a page of ${pageBytes(res)} bytes of events`)
    assert.equal(
      page.nextCursor,
      page.items.at(-1)?.id,
      'a short page resumes after its last event',
    )
  }
}

describe('memory of the feed', () => {
  it('file store: RSS does not grow with the feed, and eight concurrent pages of limit=1000 stay within 1 MiB each', {
    timeout: 180_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'feed-memory-'), 'data')
    // A heap too small for the feed's bodies: a feed kept in memory (over 100 MB of events) dies
    // here, whatever the runtime's garbage collector does with RSS (Node 26 keeps more of it).
    const child = await startChild({
      dataDir,
      env: { LOG_LEVEL: 'warn', NODE_OPTIONS: `--max-old-space-size=${HEAP_MB}` },
    })
    t.after(() => child.stop('SIGKILL'))
    const pid = child.proc.pid ?? 0
    const users = await Promise.all(
      Array.from({ length: WRITERS }, (_, i) => createBigUser(child.url, `u${i}`)),
    )
    // The warm-up lets the heap reach its working size before the baseline is read.
    await patchAll(child.url, users, 40, 'w')
    const before = memoryOf(pid)
    await patchAll(child.url, users, PATCHES / WRITERS, 'p')
    const after = memoryOf(pid)
    t.diagnostic(
      `RSS ${before.rss.toFixed(0)} MB before ${PATCHES} patches, ${after.rss.toFixed(0)} MB after (peak ${after.peak.toFixed(0)} MB)`,
    )
    // Kept in memory, the 3,200 events would take over 100 MB (33 KB of metadata each).
    assert.equal(child.proc.exitCode, null, `the service died:\n${child.stderr().slice(-2000)}`)
    assert.ok(
      after.rss - before.rss < 100,
      `RSS grew from ${before.rss.toFixed(0)} to ${after.rss.toFixed(0)} MB`,
    )

    const pages = await eightPages(child.url)
    const read = memoryOf(pid)
    t.diagnostic(
      `RSS ${read.rss.toFixed(0)} MB after eight pages (peak ${read.peak.toFixed(0)} MB)`,
    )
    assert.ok(
      read.peak < after.peak + 60,
      `eight pages took the peak RSS from ${after.peak.toFixed(0)} to ${read.peak.toFixed(0)} MB`,
    )
    checkPages(pages)

    // One user's events, followed page by page: each once, in version order, every page within the bound.
    const whole = await readWholeFeed(child.url, `limit=1000&userId=${users[0] ?? ''}`)
    assert.deepEqual(
      whole.items.map((item) => item.version),
      Array.from({ length: 1 + 40 + PATCHES / WRITERS }, (_, i) => i + 1),
    )
    assert.ok(whole.pages.length > 10, `${whole.pages.length} pages`)
    // A page's body is its events, a comma between two, and a few bytes of frame.
    assert.ok(
      whole.pages.every((res) => Buffer.byteLength(res.text) <= EVENT_PAGE_MAX_BYTES + 1100),
    )
  })

  it('PostgreSQL: eight concurrent pages of limit=1000 of large events stay within 1 MiB each and RSS stays low', {
    skip: SKIP_POSTGRES,
    timeout: 180_000,
  }, async (t) => {
    const url = await freshDatabase(t)
    const dataDir = path.join(await makeTempDir(t, 'feed-memory-pg-'), 'data')
    // The same small heap as above: eight whole pages (hundreds of MB) die here, and the collector
    // works before RSS has grown far (Node 26 otherwise keeps more garbage before a major GC).
    const child = await startChild({
      dataDir,
      env: {
        LOG_LEVEL: 'warn',
        DATABASE_URL: url,
        NODE_OPTIONS: `--max-old-space-size=${HEAP_MB}`,
      },
    })
    t.after(() => child.stop('SIGKILL'))
    const pid = child.proc.pid ?? 0
    const users = await Promise.all(
      Array.from({ length: WRITERS }, (_, i) => createBigUser(child.url, `u${i}`)),
    )
    await patchAll(child.url, users, 250, 'p')
    const before = memoryOf(pid)
    const pages = [...(await eightPages(child.url)), ...(await eightPages(child.url))]
    const after = memoryOf(pid)
    t.diagnostic(
      `RSS ${before.rss.toFixed(0)} MB, peak ${before.peak.toFixed(0)} MB before the pages; peak ${after.peak.toFixed(0)} MB after`,
    )
    // Eight whole pages of 1,000 such events would hold hundreds of MB at once: the capped heap
    // kills such a service, and its peak RSS rose by 1,250 MB before pages were bounded. Bounded,
    // the peak rises by 40-100 MB depending on the runtime (buffers outside the heap count too).
    assert.equal(child.proc.exitCode, null, `the service died:\n${child.stderr().slice(-2000)}`)
    assert.ok(
      after.peak < before.peak + 150,
      `eight pages took the peak RSS from ${before.peak.toFixed(0)} to ${after.peak.toFixed(0)} MB`,
    )
    checkPages(pages)
    const { items } = await readWholeFeed(child.url, `limit=1000&userId=${users[0] ?? ''}`)
    assert.deepEqual(
      items.map((item) => item.version),
      Array.from({ length: 251 }, (_, i) => i + 1),
      'every event once, in order',
    )
  })
})
