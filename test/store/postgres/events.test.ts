import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import {
  PostgresStore,
  type PostgresStoreOptions,
} from '../../../src/store/postgres/postgres-store.js'
import { openSse } from '../../events/sse-client.js'
import { sleep } from '../../helpers/child.js'
import { assertProblem } from '../../helpers/http.js'
import {
  freshDatabase,
  freshSchema,
  requireDatabaseUrl,
  SKIP_POSTGRES,
  sql,
} from '../../helpers/postgres.js'
import { startService, uniqueEmail } from '../../helpers/service.js'
import { makeToken } from '../../helpers/tokens.js'

const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })
const writer = makeToken({ sub: 'admin-9', scope: 'users:read users:write users:admin' })

interface FeedEvent {
  id: string
  type: string
  userId: string
  version: number
  actor?: string
  requestId?: string
  changed?: string[]
  user?: { email: string }
}

function pgStore(
  t: TestContext,
  schema: string,
  options: Partial<PostgresStoreOptions> = {},
): PostgresStore {
  const store = new PostgresStore({
    url: requireDatabaseUrl(),
    schema,
    eventPollMs: 50,
    ...options,
  })
  t.after(() => store.close())
  return store
}

describe('the change feed on PostgreSQL', { skip: SKIP_POSTGRES }, () => {
  it("appends one event per change in the change's transaction, none for a no-op, and pages them", async (t) => {
    const svc = await startService(t, { store: pgStore(t, freshSchema(t)) })
    const email = uniqueEmail()
    const created = await svc.call('POST', '/users', {
      token: writer,
      json: { email, name: 'Bo' },
      headers: { 'x-request-id': 'pg-1' },
    })
    assert.equal(created.status, 201)
    const id = created.json<{ id: string }>().id
    const patch = { token: writer, contentType: 'application/merge-patch+json' }
    assert.equal(
      (await svc.call('PATCH', `/users/${id}`, { ...patch, json: { email: uniqueEmail() } }))
        .status,
      200,
    )
    assert.equal((await svc.call('PATCH', `/users/${id}`, { ...patch, json: {} })).status, 200)
    assert.equal((await svc.call('POST', `/users/${id}:activate`, { token: writer })).status, 200)
    assert.equal((await svc.call('POST', `/users/${id}:suspend`, { token: writer })).status, 200)
    assert.equal((await svc.call('DELETE', `/users/${id}`, { token: writer })).status, 204)
    const res = await svc.call('GET', '/events', { token: reader })
    assert.equal(res.status, 200, res.text)
    const page = res.json<{ items: FeedEvent[]; nextCursor: string }>()
    assert.deepEqual(
      page.items.map((event) => [event.type, event.version]),
      [
        ['user.created', 1],
        ['user.updated', 2],
        ['user.activated', 3],
        ['user.suspended', 4],
        ['user.deleted', 5],
      ],
    )
    assert.equal(page.items[0]?.requestId, 'pg-1')
    assert.equal(page.items[0]?.user?.email, email)
    assert.deepEqual(page.items[1]?.changed, ['email'])
    assert.ok(page.items.every((event) => event.actor === 'admin-9' && event.userId === id))
    assert.equal(page.items[4]?.user, undefined)
    assert.equal(page.nextCursor, page.items[4]?.id)
    const two = (await svc.call('GET', '/events?limit=2', { token: reader })).json<{
      items: FeedEvent[]
      nextCursor: string
    }>()
    const rest = (
      await svc.call('GET', `/events?after=${two.nextCursor}&type=user.deleted`, { token: reader })
    ).json<{ items: FeedEvent[]; nextCursor: string }>()
    assert.deepEqual(
      rest.items.map((event) => event.type),
      ['user.deleted'],
    )
    assert.equal(rest.nextCursor, page.nextCursor)
  })

  it('gives ids in commit order across two replicas writing at once, one event per change', async (t) => {
    const schema = freshSchema(t)
    const a = await startService(t, { store: pgStore(t, schema) })
    const b = await startService(t, { store: pgStore(t, schema) })
    const stream = await openSse(`${a.baseUrl}/events`, reader)
    t.after(() => {
      stream.close()
    })
    const users = await Promise.all(
      Array.from({ length: 30 }, (_, i) => (i % 2 === 0 ? a : b).createUser()),
    )
    const activated = await Promise.all(
      users.map((user, i) => (i % 2 === 0 ? b : a).call('POST', `/users/${user.id}:activate`)),
    )
    for (const res of activated) assert.equal(res.status, 200, res.text)
    await stream.waitFor(60)
    const ids = stream.events.map((event) => event.id)
    assert.deepEqual([...ids].sort(), ids)
    assert.equal(new Set(ids).size, 60)
    const changes = stream.events.map((event) => {
      const data = JSON.parse(event.data) as FeedEvent
      return `${data.userId} ${data.version}`
    })
    assert.equal(new Set(changes).size, 60, 'one event per change')
    const rows = await sql(`SELECT count(*)::int AS n FROM ${schema}.events`)
    assert.equal(rows.rows[0]?.n, 60)
  })

  it('wakes a stream on one replica with NOTIFY when another replica commits, without waiting for the poll', async (t) => {
    const schema = freshSchema(t)
    // A poll far longer than the test: only the notification can bring the event in time.
    const a = await startService(t, { store: pgStore(t, schema, { eventPollMs: 600_000 }) })
    const b = await startService(t, { store: pgStore(t, schema, { eventPollMs: 600_000 }) })
    const stream = await openSse(`${a.baseUrl}/events`, reader)
    t.after(() => {
      stream.close()
    })
    // The listener connects as the stream opens: write until one event has come through it.
    const written = new Set<string>()
    const deadline = Date.now() + 20_000
    while (stream.events.length === 0 && Date.now() < deadline) {
      written.add((await b.createUser()).id)
      await stream.waitFor(1, 300).catch(() => undefined)
    }
    assert.ok(stream.events.length >= 1, 'no event reached the stream on the other replica')
    const user = await b.createUser()
    await stream.waitFor(written.size + 1, 10_000)
    assert.equal((JSON.parse(stream.events.at(-1)?.data ?? '{}') as FeedEvent).userId, user.id)
  })

  it('listens again when its LISTEN connection is ended (a database restart), within seconds', {
    timeout: 60_000,
  }, async (t) => {
    // A database of its own: the test ends every LISTEN session in it.
    const url = await freshDatabase(t)
    const store = (): PostgresStore => {
      const made = new PostgresStore({ url, eventPollMs: 600_000 })
      t.after(() => made.close())
      return made
    }
    const a = await startService(t, { store: store() })
    const b = await startService(t, { store: store() })
    const stream = await openSse(`${a.baseUrl}/events`, reader)
    t.after(() => {
      stream.close()
    })
    /** Writes on b until the stream on a has `count` events, which only NOTIFY can bring. */
    const writeUntil = async (count: number): Promise<void> => {
      const deadline = Date.now() + 20_000
      while (stream.events.length < count && Date.now() < deadline) {
        await b.createUser()
        await stream.waitFor(count, 300).catch(() => undefined)
      }
      assert.ok(stream.events.length >= count, `${stream.events.length} events, not ${count}`)
    }
    await writeUntil(1)
    const name = new URL(url).pathname.slice(1)
    const ended = await sql(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'LISTEN%'",
      [name],
    )
    // a's, and b's (its webhook delivery follows the feed too).
    assert.ok(ended.rows.length >= 1)
    await writeUntil(stream.events.length + 1)
    // a listens again (the stream above); b on its own retry timer, maybe a little later.
    const listening = async (): Promise<unknown> =>
      (
        await sql(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'LISTEN%'",
          [name],
        )
      ).rows[0]?.n
    const deadline = Date.now() + 10_000
    while ((await listening()) !== ended.rows.length && Date.now() < deadline) await sleep(50)
    assert.equal(await listening(), ended.rows.length)
  })

  it('streams live while another replica writes, and resumes with Last-Event-ID with no gap or duplicate', async (t) => {
    const schema = freshSchema(t)
    const a = await startService(t, { store: pgStore(t, schema) })
    const b = await startService(t, { store: pgStore(t, schema) })
    const first = await openSse(`${a.baseUrl}/events`, reader)
    t.after(() => {
      first.close()
    })
    const written: string[] = []
    for (let i = 0; i < 4; i += 1) written.push((await b.createUser()).id)
    await first.waitFor(4)
    first.close()
    for (let i = 0; i < 3; i += 1) written.push((await b.createUser()).id)
    const again = await openSse(`${a.baseUrl}/events`, reader, {
      'last-event-id': first.events.at(-1)?.id ?? '',
    })
    t.after(() => {
      again.close()
    })
    written.push((await a.createUser()).id)
    await again.waitFor(4)
    const all = [...first.events, ...again.events]
    assert.equal(new Set(all.map((event) => event.id)).size, all.length, 'no duplicate')
    assert.deepEqual(
      all.map((event) => (JSON.parse(event.data) as FeedEvent).userId),
      written,
      'no gap, in order',
    )
  })

  it('prunes rows past the retention and answers 410 for a cursor before them', async (t) => {
    let clock = Date.now()
    const store = pgStore(t, freshSchema(t), { now: () => clock, eventsRetentionDays: 30 })
    const svc = await startService(t, { store })
    await svc.createUser()
    clock += 31 * 86_400_000
    const fresh = await svc.createUser()
    await store.pruneEvents()
    assertProblem(
      await svc.call('GET', `/events?after=${'0'.repeat(16)}`, { token: reader }),
      410,
      'cursor_expired',
    )
    const page = (await svc.call('GET', '/events', { token: reader })).json<{
      items: FeedEvent[]
    }>()
    assert.deepEqual(
      page.items.map((event) => event.userId),
      [fresh.id],
    )
  })
})
