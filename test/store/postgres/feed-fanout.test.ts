import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import pg from 'pg'

import { PostgresStore } from '../../../src/store/postgres/postgres-store.js'
import { feedReader } from '../../events/feed-fixtures.js'
import { openSse, type SseClient } from '../../events/sse-client.js'
import { sleep } from '../../helpers/child.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../../helpers/postgres.js'
import { startService, type TestService } from '../../helpers/service.js'

/**
 * One follower per process: however many streams are open, a process learns of a commit with one
 * read of the database and gives the streams their events from memory.
 */

const STREAMS = 100
const PATCHES = 20

/** The pg module with a Pool that counts every statement its connections run. */
function countingPg(counter: { statements: number }) {
  class CountingPool extends pg.Pool {
    constructor(config?: pg.PoolConfig) {
      super(config)
      this.on('connect', (client) => {
        const query = client.query.bind(client) as (...args: unknown[]) => unknown
        Object.assign(client, {
          query: (...args: unknown[]) => {
            counter.statements += 1
            return query(...args)
          },
        })
      })
    }
  }
  return { Pool: CountingPool }
}

async function countingService(t: TestContext) {
  const counter = { statements: 0 }
  const store = new PostgresStore({
    url: requireDatabaseUrl(),
    schema: freshSchema(t),
    // The poll and the probe run far apart: what is counted is what commits cost.
    eventPollMs: 600_000,
    probeIntervalMs: 600_000,
    poolSize: 20,
    pg: countingPg(counter) as unknown as typeof pg,
  })
  t.after(() => store.close())
  const svc = await startService(t, { store, maxEventStreams: STREAMS + 10 })
  return { svc, counter }
}

/** Statements run per PATCH, over PATCHES renames of one user, one after another. */
async function statementsPerPatch(
  svc: TestService,
  counter: { statements: number },
  id: string,
): Promise<number> {
  await sleep(300)
  const before = counter.statements
  for (let i = 0; i < PATCHES; i += 1) {
    const res = await svc.call('PATCH', `/users/${id}`, {
      json: { name: `Name ${i}` },
      contentType: 'application/merge-patch+json',
    })
    assert.equal(res.status, 200, res.text)
    // Each commit's wake-ups run before the next one, as they would between writes apart in time.
    await sleep(20)
  }
  await sleep(300)
  return (counter.statements - before) / PATCHES
}

describe('the PostgreSQL feed with many streams', { skip: SKIP_POSTGRES }, () => {
  it(`${STREAMS} idle type-filtered streams cost about what none cost per commit, and each gets its event`, {
    timeout: 120_000,
  }, async (t) => {
    const { svc, counter } = await countingService(t)
    const user = await svc.createUser()
    const alone = await statementsPerPatch(svc, counter, user.id)
    const streams: SseClient[] = []
    t.after(() => {
      for (const stream of streams) stream.close()
    })
    for (let i = 0; i < STREAMS; i += 1)
      streams.push(await openSse(`${svc.baseUrl}/events?type=user.deleted`, feedReader))
    for (const stream of streams) assert.equal(stream.status, 200)
    const followed = await statementsPerPatch(svc, counter, user.id)
    t.diagnostic(`statements per PATCH: ${alone} with no stream, ${followed} with ${STREAMS}`)
    assert.ok(
      followed <= alone + 3,
      `${followed} statements per PATCH with ${STREAMS} streams, ${alone} with none`,
    )
    const deleted = await svc.call('DELETE', `/users/${user.id}`)
    assert.equal(deleted.status, 204, deleted.text)
    for (const stream of streams) await stream.waitFor(1, 10_000)
    for (const stream of streams) {
      assert.deepEqual(
        stream.events.map((event) => [event.event, JSON.parse(event.data).userId]),
        [['user.deleted', user.id]],
      )
    }
  })
})
