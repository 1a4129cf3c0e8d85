import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import pg from 'pg'

import { PostgresStore } from '../../../src/store/postgres/postgres-store.js'
import { feedReader } from '../../events/feed-fixtures.js'
import { openSse, type SseClient } from '../../events/sse-client.js'
import { sleep } from '../../helpers/child.js'
import { waitFor } from '../../helpers/ops.js'
import {
  freshSchema,
  replicaStore,
  requireDatabaseUrl,
  SKIP_POSTGRES,
  sql,
} from '../../helpers/postgres.js'
import { startService, type TestService } from '../../helpers/service.js'

/**
 * One follower per process: however many streams are open, a process learns of a commit with one
 * read of the database and gives the streams their events from memory.
 */

const STREAMS = 100
const PATCHES = 20

/** Statements run, in all and by name (or by text, for a statement without one). */
interface Counter {
  statements: number
  readonly byName: Map<string, number>
}

/** The pg module with a Pool that counts every statement its connections run. */
function countingPg(counter: Counter) {
  class CountingPool extends pg.Pool {
    constructor(config?: pg.PoolConfig) {
      super(config)
      this.on('connect', (client) => {
        const query = client.query.bind(client) as (...args: unknown[]) => unknown
        Object.assign(client, {
          query: (...args: unknown[]) => {
            counter.statements += 1
            const name = statementName(args[0])
            counter.byName.set(name, (counter.byName.get(name) ?? 0) + 1)
            return query(...args)
          },
        })
      })
    }
  }
  return { Pool: CountingPool }
}

function statementName(statement: unknown): string {
  if (typeof statement === 'string') return statement
  if (typeof statement !== 'object' || statement === null) return String(statement)
  const { name, text } = statement as { name?: unknown; text?: unknown }
  return typeof name === 'string' ? name : String(text)
}

async function countingService(t: TestContext, schema = freshSchema(t)) {
  const counter: Counter = { statements: 0, byName: new Map() }
  const store = new PostgresStore({
    url: requireDatabaseUrl(),
    schema,
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
async function statementsPerPatch(svc: TestService, counter: Counter, id: string): Promise<number> {
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

  it("a commit of a service on another schema of the same database wakes none of this one's reads", {
    timeout: 60_000,
  }, async (t) => {
    const schema = freshSchema(t)
    const { svc, counter } = await countingService(t, schema)
    const stream = await openSse(`${svc.baseUrl}/events`, feedReader)
    t.after(() => stream.close())
    assert.equal(stream.status, 200)
    const other = await startService(t, { store: replicaStore(t, freshSchema(t)) })
    const replica = await startService(t, { store: replicaStore(t, schema) })
    await sleep(300)
    const pagesBefore = counter.byName.get('events_page') ?? 0
    for (let i = 0; i < PATCHES; i += 1) {
      await other.createUser()
      await sleep(20)
    }
    await sleep(300)
    const pages = (counter.byName.get('events_page') ?? 0) - pagesBefore
    assert.equal(pages, 0, `${pages} reads of the feed for ${PATCHES} commits on another schema`)
    assert.equal(stream.events.length, 0)
    // A notification without a schema (a replica of an older version) still wakes it.
    await sql(`SELECT pg_notify('user_service_events', '')`)
    await waitFor(
      'a read of the feed',
      () => ((counter.byName.get('events_page') ?? 0) > pagesBefore ? true : undefined),
      5000,
    )
    // A replica on the same schema still wakes it at once: its poll runs every ten minutes.
    const created = await replica.createUser()
    await stream.waitFor(1, 10_000)
    assert.deepEqual(
      stream.events.map((event) => [event.event, JSON.parse(event.data).userId]),
      [['user.created', created.id]],
    )
  })
})
