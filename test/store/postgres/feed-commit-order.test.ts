import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import pg from 'pg'

import { silentLogger } from '../../../src/log/logger.js'
// Namespace imports: the file loads (and its tests fail one by one) on a release without the time-outs.
import * as connection from '../../../src/store/postgres/connection.js'
import { PostgresStore } from '../../../src/store/postgres/postgres-store.js'
import * as storeOptions from '../../../src/store/postgres/store-options.js'
import { feedReader } from '../../events/feed-fixtures.js'
import { openSse } from '../../events/sse-client.js'
import { sleep } from '../../helpers/child.js'
import { assertProblem, request, type TestResponse } from '../../helpers/http.js'
import { waitFor } from '../../helpers/ops.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES, sql } from '../../helpers/postgres.js'
import {
  createMemoryLogger,
  startService,
  type TestService,
  uniqueEmail,
} from '../../helpers/service.js'
import { makeUser } from '../../helpers/store-users.js'

/**
 * The PostgreSQL feed in commit order, through HTTP: a change that could only commit after
 * another one is listed after it; no transaction the service does not own holds the feed back;
 * the service's sessions carry their time-outs; a commit kept from the event counter is reported.
 */

interface FeedItem {
  id: string
  type: string
  userId: string
  version: number
}

interface Page {
  items: FeedItem[]
  nextCursor: string
}

async function service(
  t: TestContext,
  extra: Partial<ConstructorParameters<typeof PostgresStore>[0]> = {},
): Promise<{ svc: TestService; schema: string; storeLogs: Record<string, unknown>[] }> {
  const schema = freshSchema(t)
  const storeLogs: Record<string, unknown>[] = []
  const store = new PostgresStore({
    url: requireDatabaseUrl(),
    schema,
    logger: createMemoryLogger(storeLogs),
    ...extra,
  })
  t.after(() => store.close())
  return { svc: await startService(t, { store }), schema, storeLogs }
}

/** A session of the test's own on the service's schema (or another database's URL). */
async function session(t: TestContext, schema?: string, url = requireDatabaseUrl()) {
  const client = new pg.Client({
    connectionString: url,
    ...(schema === undefined ? {} : { options: `-c search_path=${schema}` }),
  })
  await client.connect()
  t.after(() => client.end())
  return client
}

async function feed(svc: TestService, after?: string): Promise<Page> {
  const res = await request(
    'GET',
    `${svc.baseUrl}/events?limit=1000${after === undefined ? '' : `&after=${after}`}`,
    { token: feedReader },
  )
  assert.equal(res.status, 200, res.text)
  return res.json<Page>()
}

/**
 * Waits until `count` of the service's sessions wait for a lock `holder` holds. Only for that
 * holder: the server is shared with the other test files, whose sessions wait for locks of their own.
 */
async function lockWaiters(count: number, holder: pg.Client): Promise<void> {
  const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid
  assert.ok(pid !== undefined)
  await waitFor(
    `${count} session(s) waiting for ${pid}`,
    async () => {
      const result = await sql(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE application_name = 'user-service' AND $1::int = ANY (pg_blocking_pids(pid))`,
        [pid],
      )
      return (result.rows[0]?.n ?? 0) >= count ? true : undefined
    },
    10_000,
    20,
  )
}

/** A user row inserted and left uncommitted: its email stays taken until the session ends. */
async function holdEmail(client: pg.Client, email: string): Promise<void> {
  const user = makeUser({ email })
  await client.query('BEGIN')
  await client.query(
    `INSERT INTO users (id, email, email_key, name, name_key, status, metadata, created_at, updated_at, version)
      VALUES ($1, $2, $3, $4, $5, 'pending', '{}', $6, $6, 1)`,
    [user.id, email, email.toLowerCase(), user.name, user.name.toLowerCase(), user.createdAt],
  )
}

describe('the PostgreSQL feed in commit order', { skip: SKIP_POSTGRES }, () => {
  it('lists a deletion before the create it freed the email for, when their transactions overlapped', {
    timeout: 60_000,
  }, async (t) => {
    const { svc, schema } = await service(t)
    const email = uniqueEmail('freed')
    const a = await svc.createUser({ email })
    const start = (await feed(svc)).nextCursor
    // Two sessions of the test's own hold two emails, so that the service's group commits wait:
    // the first batch (D) until `first` ends, the second (E, C, B) inside its transaction, after E
    // is written, until `second` ends.
    const first = await session(t, schema)
    const second = await session(t, schema)
    const emailD = uniqueEmail('d')
    const emailC = uniqueEmail('c')
    await holdEmail(first, emailD)
    await holdEmail(second, emailC)
    const overlap = async (): Promise<void> => {
      const post = (body: Record<string, string>): Promise<TestResponse> =>
        svc.call('POST', '/users', { json: body })
      const d = post({ email: emailD, name: 'D' })
      await lockWaiters(1, first)
      const e = post({ email: uniqueEmail('e'), name: 'E' })
      await sleep(50)
      const c = post({ email: emailC, name: 'C' })
      await sleep(50)
      // B wants A's email: it can only be created once A is deleted.
      const b = post({ email, name: 'B' })
      await sleep(200)
      await first.query('ROLLBACK')
      assert.equal((await d).status, 201)
      // E, C and B are one batch now, its transaction waiting (after E's row) for C's email.
      await lockWaiters(1, second)
      const deleted = await svc.call('DELETE', `/users/${a.id}`)
      assert.equal(deleted.status, 204, deleted.text)
      await second.query('ROLLBACK')
      const [eRes, cRes, bRes] = await Promise.all([e, c, b])
      assert.equal(eRes.status, 201, eRes.text)
      assert.equal(cRes.status, 201, cRes.text)
      assert.equal(bRes.status, 201, bRes.text)
      const bId = bRes.json<{ id: string }>().id
      const page = await feed(svc, start)
      const order = page.items.map((item) => `${item.type} ${item.userId}`)
      const gone = order.indexOf(`user.deleted ${a.id}`)
      const made = order.indexOf(`user.created ${bId}`)
      assert.ok(gone >= 0 && made >= 0, order.join(', '))
      assert.ok(gone < made, `A's deletion is listed before B's creation: ${order.join(', ')}`)
      assert.equal(page.items.length, 5, 'D, A deleted, E, C, B')
      const ids = page.items.map((item) => item.id)
      assert.deepEqual([...ids].sort(), ids)
    }
    try {
      await overlap()
    } finally {
      // Ended here, not in an after-hook: the schema's drop, hooked first, would wait for them.
      await first.query('ROLLBACK').catch(() => undefined)
      await second.query('ROLLBACK').catch(() => undefined)
    }
  })
  it('shows an event at once on GET /events and on a stream while a transaction stays open in another database', {
    timeout: 60_000,
  }, async (t) => {
    const { svc } = await service(t)
    await svc.createUser()
    const start = (await feed(svc)).nextCursor
    const stream = await openSse(`${svc.baseUrl}/events`, feedReader, { 'last-event-id': start })
    t.after(() => {
      stream.close()
    })
    const other = new URL(requireDatabaseUrl())
    other.pathname = '/postgres'
    const foreign = await session(t, undefined, other.toString())
    await foreign.query('BEGIN')
    await foreign.query('CREATE TEMP TABLE t (x int)')
    const user = await svc.createUser()
    const page = await feed(svc, start)
    assert.deepEqual(
      page.items.map((item) => [item.type, item.userId]),
      [['user.created', user.id]],
      'the event is listed at once',
    )
    assert.equal(page.nextCursor, page.items[0]?.id)
    await stream.waitFor(1, 2000)
    assert.equal((JSON.parse(stream.events[0]?.data ?? '{}') as FeedItem).userId, user.id)
    await foreign.query('ROLLBACK')
  })

  it('cancels a statement of the service that waits past its statement time-out: 503, nothing changed', {
    timeout: 60_000,
  }, async (t) => {
    const { svc, schema } = await service(t, { databaseStatementTimeoutMs: 300 })
    const user = await svc.createUser()
    const holder = await session(t, schema)
    await holder.query('BEGIN')
    await holder.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [user.id])
    const started = Date.now()
    const patched = svc.call('PATCH', `/users/${user.id}`, {
      json: { name: 'Renamed' },
      contentType: 'application/merge-patch+json',
    })
    const timer = setTimeout(() => {
      void holder.query('ROLLBACK')
    }, 5000)
    const res = await patched
    clearTimeout(timer)
    const took = Date.now() - started
    await holder.query('ROLLBACK').catch(() => undefined)
    assertProblem(res, 503, 'storage_unavailable')
    assert.ok(res.headers.get('retry-after') !== null, 'Retry-After')
    assert.ok(took < 4000, `cancelled after ${took} ms`)
    assert.deepEqual(await svc.getUser(user.id), user, 'nothing changed')
  })

  it("sets both time-outs on every session of the store's pool, and the server ends one left idle in a transaction", {
    timeout: 60_000,
  }, async (t) => {
    const db = new connection.PgConnection({
      url: requireDatabaseUrl(),
      logger: silentLogger,
      schema: undefined,
      poolSize: 2,
      pg: undefined,
      seenHead: () => 0n,
      ...storeOptions.SESSION_DEFAULTS,
      statementTimeoutMs: 1234,
      idleInTransactionTimeoutMs: 300,
    })
    await db.connect()
    t.after(() => db.end())
    const client = await db.client()
    try {
      const shown = await client.query<{ s: string; i: string }>(
        "SELECT current_setting('statement_timeout') AS s, current_setting('idle_in_transaction_session_timeout') AS i",
      )
      assert.deepEqual(shown.rows[0], { s: '1234ms', i: '300ms' })
      await client.query('BEGIN')
      await sleep(800)
      await assert.rejects(client.query('SELECT 1'), /terminat|idle-in-transaction|Connection/i)
    } finally {
      client.release(true)
    }
  })

  it("sends a time-out of 0 (none) to the server, over a default set on the service's database", {
    timeout: 60_000,
  }, async (t) => {
    const admin = new pg.Client({ connectionString: requireDatabaseUrl() })
    await admin.connect()
    const name = `user_service_timeouts_${process.pid}_${Date.now()}`
    await admin.query(`CREATE DATABASE ${name}`)
    await admin.query(`ALTER DATABASE ${name} SET statement_timeout = '4321ms'`)
    await admin.query(`ALTER DATABASE ${name} SET idle_in_transaction_session_timeout = '4321ms'`)
    t.after(async () => {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.end()
    })
    const url = new URL(requireDatabaseUrl())
    url.pathname = `/${name}`
    const db = new connection.PgConnection({
      url: url.toString(),
      logger: silentLogger,
      schema: undefined,
      poolSize: 1,
      pg: undefined,
      seenHead: () => 0n,
      ...storeOptions.SESSION_DEFAULTS,
      statementTimeoutMs: 0,
      idleInTransactionTimeoutMs: 0,
    })
    await db.connect()
    const client = await db.client()
    try {
      const shown = await client.query<{ s: string; i: string }>(
        "SELECT current_setting('statement_timeout') AS s, current_setting('idle_in_transaction_session_timeout') AS i",
      )
      assert.deepEqual(shown.rows[0], { s: '0', i: '0' })
    } finally {
      client.release(true)
      await db.end()
    }
  })

  it('reports a commit kept from the event counter: a warn line naming the blocking session and the stall metric', {
    timeout: 60_000,
  }, async (t) => {
    // Two connections: the writers waiting for the counter take them both, and the question of
    // who blocks them must still be asked.
    const { svc, schema, storeLogs } = await service(t, { feedStallWarnMs: 300, poolSize: 2 })
    const users = [await svc.createUser(), await svc.createUser(), await svc.createUser()]
    const holder = await session(t, schema)
    await holder.query('BEGIN')
    await holder.query('SELECT * FROM event_counter FOR UPDATE')
    const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid
    await sleep(200)
    const writes = users.map((user) =>
      svc.call('PATCH', `/users/${user.id}`, {
        json: { name: 'Stalled' },
        contentType: 'application/merge-patch+json',
      }),
    )
    try {
      const deadline = Date.now() + 10_000
      const warning = (): Record<string, unknown> | undefined =>
        storeLogs.find((line) => line['level'] === 'warn' && line['blockingPid'] !== undefined)
      while (warning() === undefined && Date.now() < deadline) await sleep(50)
      const line = warning()
      assert.ok(line !== undefined, `a warn line: ${JSON.stringify(storeLogs)}`)
      assert.equal(line['blockingPid'], pid)
      assert.equal(typeof line['blockingTransactionAgeS'], 'number')
      assert.ok(Number(line['blockingTransactionAgeS']) >= 0.3, JSON.stringify(line))
      assert.match(String(line['msg']), /change feed cannot advance/)
      const metrics = await svc.call('GET', '/metrics')
      assert.equal(metrics.status, 200)
      const stalled = Number(
        /^user_service_event_feed_stalled_seconds (\S+)$/m.exec(metrics.text)?.[1] ?? 'NaN',
      )
      assert.ok(stalled >= 0.3, `stalled ${stalled} s`)
      // One per writer waiting for the counter (the third waits for a connection of the pool).
      const stalls = Number(
        /^user_service_event_feed_stalls_total (\S+)$/m.exec(metrics.text)?.[1] ?? 'NaN',
      )
      assert.ok(stalls >= 1 && stalls <= 2, `${stalls} stalls`)
    } finally {
      // Ended here, not in an after-hook: the schema's drop, hooked first, would wait for it.
      await holder.query('COMMIT')
    }
    for (const res of await Promise.all(writes)) assert.equal(res.status, 200, res.text)
    const after = await svc.call('GET', '/metrics')
    assert.match(after.text, /^user_service_event_feed_stalled_seconds 0$/m)
  })
})
