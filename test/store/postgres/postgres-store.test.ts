import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import pg from 'pg'

import { StartError } from '../../../src/domain/errors.js'
import type { UserStatus } from '../../../src/domain/user.js'
import { ConfigError, parseConfig } from '../../../src/process/config.js'
import { createUserService } from '../../../src/process/create-user-service.js'
import { MemoryStore } from '../../../src/store/memory-store.js'
import { classifyPgError } from '../../../src/store/postgres/classify-error.js'
import { loadPg } from '../../../src/store/postgres/driver.js'
import {
  PostgresStore,
  type PostgresStoreOptions,
} from '../../../src/store/postgres/postgres-store.js'
import {
  MIGRATIONS,
  SCHEMA_VERSION,
  SchemaTooNewError,
} from '../../../src/store/postgres/schema.js'
import { likePattern } from '../../../src/store/postgres/sql.js'
import type { ListQuery, Store } from '../../../src/store/store.js'
import { MAX_USER_VERSION, MAX_VERSION } from '../../../src/users/user-fields.js'
import { listLockFiles } from '../../helpers/data-files.js'
import { assertProblem, request, type TestResponse } from '../../helpers/http.js'
import {
  freshDatabase,
  freshSchema,
  requireDatabaseUrl,
  SKIP_POSTGRES,
  sql,
} from '../../helpers/postgres.js'
import { makeTempDir, startService, uniqueEmail } from '../../helpers/service.js'
import {
  describeStoreContract,
  listAll,
  openStore,
  snapshotStore,
} from '../../helpers/store-suite.js'
import { changeUser, makeUser } from '../../helpers/store-users.js'
import { makeToken, TEST_SECRET } from '../../helpers/tokens.js'

/** A store on a schema of its own, closed when the test ends (not opened). */
function newStore(t: TestContext, options: Partial<PostgresStoreOptions> = {}): PostgresStore {
  const store = new PostgresStore({
    url: requireDatabaseUrl(),
    schema: freshSchema(t),
    probeIntervalMs: 100,
    ...options,
  })
  t.after(() => store.close())
  return store
}

async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

describe('the pg driver', () => {
  it('refuses the start saying npm install pg when the module is missing', async () => {
    const missing = Object.assign(new Error("Cannot find package 'pg'"), {
      code: 'ERR_MODULE_NOT_FOUND',
    })
    await assert.rejects(
      loadPg(() => Promise.reject(missing)),
      (error: unknown) => error instanceof StartError && /npm install pg/.test(error.message),
    )
  })

  it('passes other import failures on, and refuses a module without Pool', async () => {
    const broken = new Error('syntax error in pg')
    await assert.rejects(
      loadPg(() => Promise.reject(broken)),
      (error) => error === broken,
    )
    await assert.rejects(
      loadPg(() => Promise.resolve({ default: {} })),
      /no Pool/,
    )
  })

  it('loads the installed pg', async () => {
    const pg = await loadPg()
    assert.equal(typeof pg.Pool, 'function')
  })
})

describe('DATABASE_URL and WORKERS', () => {
  it('takes postgres:// and postgresql:// URLs, and WORKERS as a count or auto (one per core)', () => {
    assert.equal(parseConfig({}).databaseUrl, undefined)
    assert.equal(parseConfig({}).workers, 1)
    assert.equal(
      parseConfig({ DATABASE_URL: 'postgres://u@db/x' }).databaseUrl,
      'postgres://u@db/x',
    )
    const config = parseConfig({ DATABASE_URL: 'postgresql://u@db/x', WORKERS: 'auto' })
    assert.equal(config.workers, availableParallelism())
    assert.equal(parseConfig({ DATABASE_URL: 'postgresql://u@db/x', WORKERS: '3' }).workers, 3)
  })

  it('refuses other URLs, bad counts, and more than one worker on the file store', () => {
    for (const url of ['http://db/x', 'not a url', 'postgres']) {
      assert.throws(
        () => parseConfig({ DATABASE_URL: url }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.message === 'DATABASE_URL must be a postgres:// or postgresql:// URL',
      )
    }
    assert.throws(
      () => parseConfig({ DATABASE_URL: 'postgres://db/x', WORKERS: '0' }),
      /WORKERS must be between 1/,
    )
    assert.throws(
      () => parseConfig({ DATABASE_URL: 'postgres://db/x', WORKERS: 'many' }),
      /WORKERS must be a whole number/,
    )
    assert.throws(() => parseConfig({ WORKERS: '2' }), /WORKERS=2 needs DATABASE_URL/)
    assert.equal(parseConfig({ WORKERS: '1' }).workers, 1)
  })
})

describe('LIKE patterns for q', () => {
  it('takes %, _ and backslash literally', () => {
    assert.equal(likePattern('a%b_c\\d'), '%a\\%b\\_c\\\\d%')
  })
})

describe('SQLSTATE classes', () => {
  const serverError = (code: string): object =>
    Object.assign(new Error('refused'), { code, severity: 'ERROR' })

  it("takes class 22 (data exception) and 23 (integrity) as the client's input", () => {
    for (const code of ['22021', '22003', '22P02', '22023', '23505', '23514', '23502']) {
      assert.equal(classifyPgError(serverError(code)), 'input', code)
    }
  })

  it('takes connection, resource and operator classes, socket errors and time-outs as unavailable', () => {
    for (const code of ['08006', '08001', '53300', '53100', '57P01', '57014', '40001', 'XX000']) {
      assert.equal(classifyPgError(serverError(code)), 'unavailable', code)
    }
    // An errno is no SQLSTATE, EPIPE's five letters included; pg's own time-outs carry no code.
    for (const errno of ['EPIPE', 'ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT']) {
      assert.equal(
        classifyPgError(Object.assign(new Error(errno), { code: errno })),
        'unavailable',
        errno,
      )
    }
    assert.equal(
      classifyPgError(Object.assign(new Error('x'), { code: '22021' })),
      'unavailable',
      "a code without severity is not the server's",
    )
    assert.equal(
      classifyPgError(new Error('timeout exceeded when trying to connect')),
      'unavailable',
    )
    assert.equal(classifyPgError(undefined), 'unavailable')
  })
})

describe('PostgreSQL store', { skip: SKIP_POSTGRES }, () => {
  describeStoreContract('PostgresStore', (t) => Promise.resolve(newStore(t)))

  describe('schema and migrations', () => {
    it('records the schema version and opens again without migrating twice', async (t) => {
      const schema = freshSchema(t)
      const first = new PostgresStore({ url: requireDatabaseUrl(), schema })
      await first.open()
      const user = (await first.create(makeUser())).user
      await first.close()
      const second = new PostgresStore({ url: requireDatabaseUrl(), schema })
      t.after(() => second.close())
      await second.open()
      assert.deepEqual((await second.get(user.id))?.user, user)
      const versions = await sql(
        `SELECT version FROM ${schema}.user_service_schema ORDER BY version`,
      )
      assert.deepEqual(
        versions.rows.map((row: { version: number }) => row.version),
        Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
      )
    })

    it('lets many stores start at once on one empty schema: one migrates, all work', async (t) => {
      const schema = freshSchema(t)
      const stores = Array.from(
        { length: 4 },
        () => new PostgresStore({ url: requireDatabaseUrl(), schema }),
      )
      t.after(() => Promise.all(stores.map((store) => store.close())))
      await Promise.all(stores.map((store) => store.open()))
      const created = await Promise.all(stores.map((store) => store.create(makeUser())))
      const seen = await Promise.all(stores.map(async (store) => (await listAll(store)).length))
      // Were a store to write anywhere but its schema, say where: no table of ours may be in public.
      const where = await sql(
        `SELECT table_schema AS schema, table_name AS name FROM information_schema.tables
        WHERE table_name IN ('users', 'user_service_schema') AND table_schema IN ($1, 'public') ORDER BY 1, 2`,
        [schema],
      )
      assert.deepEqual(
        { seen, where: where.rows },
        {
          seen: stores.map(() => created.length),
          where: [
            { schema, name: 'user_service_schema' },
            { schema, name: 'users' },
          ],
        },
      )
      const versions = await sql(`SELECT count(*)::int AS n FROM ${schema}.user_service_schema`)
      assert.equal(versions.rows[0]?.n, SCHEMA_VERSION, 'each migration once')
    })

    it('refuses to start, making nothing, when its names would resolve to public (a schema the role may not use)', async (t) => {
      const admin = await freshDatabase(t)
      const role = `limited_${randomBytes(4).toString('hex')}`
      await sql(`CREATE ROLE ${role} LOGIN`)
      // After the database's own hook has dropped it, and with it every grant below.
      t.after(() => sql(`DROP ROLE IF EXISTS ${role}`))
      await sql(
        `GRANT CREATE ON DATABASE ${new URL(admin).pathname.slice(1)} TO ${role}`,
        [],
        admin,
      )
      await sql(`GRANT CREATE ON SCHEMA public TO ${role}`, [], admin)
      await sql('CREATE SCHEMA private', [], admin)
      const url = new URL(admin)
      url.username = role
      const store = new PostgresStore({ url: url.toString(), schema: 'private' })
      t.after(() => store.close())
      await assert.rejects(
        store.open(),
        /resolves to schema public, not to the configured schema private/,
      )
      const made = await sql(
        "SELECT table_schema FROM information_schema.tables WHERE table_schema IN ('public', 'private')",
        [],
        admin,
      )
      assert.deepEqual(made.rows, [])
    })

    it('refuses to open a database whose schema is newer than the code, changing nothing', async (t) => {
      const schema = freshSchema(t)
      const store = newStore(t, { schema })
      await store.open()
      await store.close()
      await sql(`INSERT INTO ${schema}.user_service_schema (version) VALUES ($1)`, [
        SCHEMA_VERSION + 1,
      ])
      const newer = newStore(t, { schema })
      await assert.rejects(
        newer.open(),
        (error: unknown) =>
          error instanceof SchemaTooNewError &&
          error.message.includes(`version ${SCHEMA_VERSION + 1}`),
      )
      const versions = await sql(`SELECT max(version) AS v FROM ${schema}.user_service_schema`)
      assert.equal(versions.rows[0]?.v, SCHEMA_VERSION + 1)
    })

    it('stores metadata as json (key order kept), time stamps exactly, and the email key computed in JavaScript', async (t) => {
      const schema = freshSchema(t)
      const store = newStore(t, { schema })
      await store.open()
      const metadata = { zeta: '1', alpha: '2', Mid: '3' }
      const user = makeUser({
        email: 'İSTANBUL.ΣΊΣΥΦΟΣ@Example.com',
        metadata,
        createdAt: '2026-01-02T03:04:05.678Z',
        updatedAt: '2026-01-02T03:04:05.679Z',
      })
      await store.create(user)
      const row = await sql(
        `SELECT pg_typeof(metadata)::text AS type, metadata::text AS metadata, email_key, created_at, updated_at FROM ${schema}.users`,
      )
      assert.equal(row.rows[0]?.type, 'json')
      assert.equal(row.rows[0]?.metadata, '{"zeta":"1","alpha":"2","Mid":"3"}')
      assert.equal(row.rows[0]?.email_key, user.email.toLowerCase())
      const read = await store.get(user.id)
      assert.deepEqual(Object.keys(read?.user.metadata ?? {}), ['zeta', 'alpha', 'Mid'])
      assert.equal(read?.user.createdAt, '2026-01-02T03:04:05.678Z')
      assert.equal(read?.user.updatedAt, '2026-01-02T03:04:05.679Z')
      const found = await store.list({
        filter: { email: user.email.toLowerCase() },
        order: 'asc',
        limit: 5,
      })
      assert.deepEqual(
        found.items.map((record) => record.user.id),
        [user.id],
      )
      await assert.rejects(store.create(makeUser({ email: user.email.toLowerCase() })), {
        code: 'duplicate_email',
      })
    })

    it('keeps index-like metadata keys in the order sent: in the row, the answers and the feed, through a merge and a reorder', async (t) => {
      const schema = freshSchema(t)
      const store = new PostgresStore({ url: requireDatabaseUrl(), schema })
      const app = await startService(t, { store })
      const sent = '{"b":"1","a":"2","9":"x","1":"y"}'
      const send = (method: string, target: string, body: string): Promise<TestResponse> =>
        app.call(method, target, {
          body,
          contentType: method === 'PATCH' ? 'application/merge-patch+json' : 'application/json',
        })
      const email = uniqueEmail('order')
      const created = await send(
        'POST',
        '/users',
        `{"email":"${email}","name":"O","metadata":${sent}}`,
      )
      assert.equal(created.status, 201, created.text)
      assert.ok(created.text.includes(`"metadata":${sent},`), created.text)
      const { id } = created.json<{ id: string }>()
      const stored = async (): Promise<unknown> =>
        (await sql(`SELECT metadata::text AS metadata FROM ${schema}.users`)).rows[0]?.metadata
      assert.equal(await stored(), sent)
      const merged = '{"b":"1","9":"x","1":"y","0":"z"}'
      const patched = await send('PATCH', `/users/${id}`, '{"metadata":{"0":"z","a":null}}')
      assert.equal(patched.status, 200, patched.text)
      assert.ok(patched.text.includes(`"metadata":${merged},`), patched.text)
      assert.equal(await stored(), merged)
      const reordered = '{"0":"z","1":"y","9":"x","b":"1"}'
      const put = await send(
        'PUT',
        `/users/${id}`,
        `{"email":"${email}","name":"O","metadata":${reordered}}`,
      )
      assert.equal(put.status, 200, put.text)
      assert.equal(put.headers.get('etag'), '"v3"')
      const got = await app.call('GET', `/users/${id}`)
      assert.ok(got.text.includes(`"metadata":${reordered},`), got.text)
      const feed = await app.call('GET', `/events?userId=${id}`, {
        token: makeToken({ scope: 'events:read' }),
      })
      assert.equal(feed.status, 200, feed.text)
      const events = feed.json<{ items: { type: string; changed?: string[] }[] }>().items
      assert.deepEqual(
        events.map((event) => [event.type, event.changed]),
        [
          ['user.created', undefined],
          ['user.updated', ['metadata']],
          ['user.updated', ['metadata']],
        ],
      )
      const shown = [...feed.text.matchAll(/"metadata":(\{[^}]*\})/g)].map((match) => match[1])
      assert.deepEqual(shown, [sent, merged, reordered])
    })
  })

  describe('tombstones', () => {
    it('keeps the id and the deletion time only, forever, and never re-creates the id', async (t) => {
      const schema = freshSchema(t)
      const store = newStore(t, { schema, now: () => Date.parse('2026-03-04T05:06:07.089Z') })
      await store.open()
      const user = (await store.create(makeUser({ email: 'gone@example.com' }))).user
      assert.equal(await store.isDeleted(user.id), false)
      await store.delete(user.id)
      assert.equal(await store.isDeleted(user.id), true)
      const rows = await sql(`SELECT * FROM ${schema}.tombstones`)
      assert.deepEqual(rows.rows, [{ id: user.id, deleted_at: '2026-03-04T05:06:07.089Z' }])
      await assert.rejects(store.create({ ...user }), {
        name: 'ServiceError',
        code: 'duplicate_id',
        message: /already exists or existed/,
      })
      assert.deepEqual(await snapshotStore(store), [])
      assert.equal(await store.isDeleted(makeUser().id), false)
    })

    it('answers the subject check in one query: the status, or none, whether the id was deleted, and the revocation time', async (t) => {
      const store = newStore(t, { schema: freshSchema(t) })
      await store.open()
      const active = (await store.create(makeUser({ status: 'active' }))).user
      const suspended = (await store.create(makeUser({ status: 'suspended' }))).user
      const gone = (await store.create(makeUser())).user
      await store.delete(gone.id)
      const none = { tokensValidAfter: undefined }
      assert.deepEqual(await store.subjectOf(active.id), {
        status: 'active',
        deleted: false,
        ...none,
      })
      assert.deepEqual(await store.subjectOf(suspended.id), {
        status: 'suspended',
        deleted: false,
        ...none,
      })
      assert.deepEqual(await store.subjectOf(gone.id), {
        status: undefined,
        deleted: true,
        ...none,
      })
      assert.deepEqual(await store.subjectOf(makeUser().id), {
        status: undefined,
        deleted: false,
        ...none,
      })
      const at = '2030-01-02T03:04:05.000Z'
      await store.update(active.id, (current) => ({
        ...current.user,
        tokensValidAfter: at,
        version: current.user.version + 1,
      }))
      assert.deepEqual(await store.subjectOf(active.id), {
        status: 'active',
        deleted: false,
        tokensValidAfter: at,
      })
    })
  })

  describe('creates that arrive together (a group commit)', () => {
    it('commits them in a few transactions, each with its event, and refuses the odd ones for their own reasons', async (t) => {
      const schema = freshSchema(t)
      const store = newStore(t, { schema })
      await store.open()
      const taken = (await store.create(makeUser({ email: 'taken@example.com' }))).user
      const gone = (await store.create(makeUser())).user
      await store.delete(gone.id)
      const before = await snapshotStore(store)
      const good = Array.from({ length: 200 }, () => makeUser())
      const refused = new Error('refused by its check')
      const outcomes = await Promise.allSettled([
        ...good.map((user) => store.create(user)),
        store.create(makeUser({ email: 'TAKEN@example.com' })),
        store.create({ ...gone }),
        store.create(makeUser(), () => {
          throw refused
        }),
        store.create(makeUser({ email: 'twice@example.com' })),
        store.create(makeUser({ email: 'Twice@example.com' })),
      ])
      const reasons = outcomes
        .slice(good.length)
        .map((outcome) =>
          outcome.status === 'rejected'
            ? ((outcome.reason as { code?: string }).code ?? (outcome.reason as Error).message)
            : 'created',
        )
      assert.deepEqual(reasons, [
        'duplicate_email',
        'duplicate_id',
        refused.message,
        'created',
        'duplicate_email',
      ])
      const made = outcomes.flatMap((outcome) =>
        outcome.status === 'fulfilled' ? [outcome.value.user.id] : [],
      )
      assert.deepEqual(
        made.slice(0, good.length),
        good.map((user) => user.id),
      )
      assert.deepEqual(
        (await listAll(store)).map((record) => record.user.id).sort(),
        [taken.id, ...made].sort(),
      )
      assert.equal(before.length, 1)
      // Without the group commit each create is its own transaction (203 of them); with it, the
      // first goes alone and the others, queued meanwhile, share the next.
      const transactions = await sql(
        `SELECT count(DISTINCT xmin::text) AS n FROM ${schema}.users WHERE id = ANY($1)`,
        [good.map((user) => user.id)],
      )
      assert.ok(
        Number(transactions.rows[0]?.n) <= 3,
        `${String(transactions.rows[0]?.n)} transactions`,
      )
      const page = await store.events.read({ limit: 1000 })
      const created = page.items
        .filter((event) => event.type === 'user.created')
        .map((event) => event.userId)
      assert.deepEqual(created.slice(0, 2), [taken.id, gone.id])
      assert.deepEqual(new Set(created.slice(2)), new Set(made))
      assert.equal(created.length, 2 + made.length)
      // Ids come from the counter, one after another in commit order: consecutive, from where
      // the store's open put the counter (its clock's floor, idFloor).
      const ids = page.items.map((event) => BigInt(`0x${event.id}`))
      const first = ids[0] ?? 0n
      assert.deepEqual(
        ids.map((id) => id - first),
        ids.map((_, i) => BigInt(i)),
        'consecutive ids, increasing',
      )
    })
  })

  describe('two stores on one database (replicas in one process)', () => {
    /** Two open stores on one fresh schema, as two replicas would be; closed when the test ends. */
    const twoStores = async (t: TestContext): Promise<[Store, Store]> => {
      const schema = freshSchema(t)
      const open = (): Promise<Store> =>
        openStore(t, () =>
          Promise.resolve(new PostgresStore({ url: requireDatabaseUrl(), schema })),
        )
      return [await open(), await open()]
    }

    it('lands every one of 30 increments spread over two stores, by compare-and-set', async (t) => {
      const [a, b] = await twoStores(t)
      const created = await a.create(makeUser())
      const increment = (store: Store): Promise<unknown> =>
        store.update(created.user.id, (current) =>
          changeUser(current.user, {
            metadata: { n: String(Number(current.user.metadata['n'] ?? '0') + 1) },
          }),
        )
      await Promise.all(Array.from({ length: 30 }, (_, i) => increment(i % 2 === 0 ? a : b)))
      const stored = await b.get(created.user.id)
      assert.equal(stored?.user.metadata['n'], '30')
      assert.equal(stored?.user.version, 31)
    })

    it('lets exactly one of concurrent same-email creates on two stores succeed', async (t) => {
      const [a, b] = await twoStores(t)
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) =>
          (i % 2 === 0 ? a : b).create(
            makeUser({ email: i % 3 === 0 ? 'Same@Example.com' : 'same@example.com' }),
          ),
        ),
      )
      assert.equal(results.filter((result) => result.status === 'fulfilled').length, 1)
      for (const result of results) {
        if (result.status === 'rejected')
          assert.equal((result.reason as { code?: unknown }).code, 'duplicate_email')
      }
      assert.equal((await listAll(a)).length, 1)
    })

    it('deletes once when a delete races an update on the other store', async (t) => {
      const [a, b] = await twoStores(t)
      const created = await a.create(makeUser())
      const results = await Promise.allSettled([
        a.update(created.user.id, (current) => changeUser(current.user, { name: 'Renamed' })),
        b.delete(created.user.id),
      ])
      assert.equal(results[1]?.status, 'fulfilled')
      assert.equal(await a.get(created.user.id), undefined)
      assert.equal(await a.isDeleted(created.user.id), true)
      await assert.rejects(
        b.update(created.user.id, (current) => changeUser(current.user)),
        { code: 'not_found' },
      )
    })
  })

  describe('q pages under the scan budget', () => {
    it('answers every page exactly as the memory store does', async (t) => {
      const store = newStore(t)
      await store.open()
      const memory = new MemoryStore()
      const statuses: UserStatus[] = ['pending', 'active', 'suspended']
      for (let i = 0; i < 60; i += 1) {
        const name = i % 7 === 0 ? `Needle_${i} 100%` : `Plain ${i}`
        const user = makeUser({
          name,
          status: statuses[i % 3] ?? 'pending',
          email: i % 11 === 0 ? `needle_${i}@example.com` : `p${i}.${makeUser().email}`,
        })
        await store.create(user)
        await memory.create(user)
      }
      const ids = (await listAll(memory)).map((record) => record.user.id)
      const queries: ListQuery[] = []
      for (const q of ['needle_', 'NEEDLE', '100%', '_', 'nothing-matches', 'e']) {
        for (const order of ['asc', 'desc'] as const) {
          for (const scanBudget of [1, 5, 13, 59, 60, 61, undefined]) {
            for (const limit of [1, 3, 100]) {
              for (const after of [undefined, ids[20], ids[59]]) {
                for (const filterStatuses of [
                  undefined,
                  ['active'] as UserStatus[],
                  ['suspended', 'pending', 'suspended'] as UserStatus[],
                ]) {
                  queries.push({
                    filter: {
                      q,
                      ...(filterStatuses === undefined ? {} : { statuses: filterStatuses }),
                    },
                    order,
                    limit,
                    ...(after === undefined ? {} : { after }),
                    ...(scanBudget === undefined ? {} : { scanBudget }),
                  })
                }
              }
            }
          }
        }
      }
      const summary = (page: Awaited<ReturnType<Store['list']>>): unknown => ({
        ids: page.items.map((record) => record.json),
        hasMore: page.hasMore,
        resumeAfter: page.resumeAfter,
      })
      // Not all at once: the pool has 10 connections, and the point is the answers, not speed.
      for (let i = 0; i < queries.length; i += 50) {
        const batch = queries.slice(i, i + 50)
        const pages = await Promise.all(batch.map((query) => store.list(query)))
        for (const [j, query] of batch.entries()) {
          assert.deepEqual(
            summary(pages[j] ?? { items: [], hasMore: false }),
            summary(await memory.list(query)),
            JSON.stringify(query),
          )
        }
      }
    })
  })

  describe('when the database does not answer', () => {
    /** Ends every session of the database but this one: the store's pool connects anew. */
    const endSessions = (name: string) =>
      sql(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
        [name],
      )

    it('answers reads and writes with 503 storage_unavailable, turns health degraded, and recovers', async (t) => {
      const url = await freshDatabase(t)
      const name = new URL(url).pathname.slice(1)
      const store = new PostgresStore({ url, probeIntervalMs: 50 })
      t.after(() => store.close())
      await store.open()
      const user = (await store.create(makeUser())).user
      await sql(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`)
      await endSessions(name)
      await waitFor('health degraded', () => store.health().state === 'degraded')
      const unavailable = { name: 'ServiceError', code: 'storage_unavailable' }
      await assert.rejects(store.get(user.id), unavailable)
      await assert.rejects(store.isDeleted(user.id), unavailable)
      await assert.rejects(store.subjectOf(user.id), unavailable)
      await assert.rejects(store.list({ filter: {}, order: 'asc', limit: 5 }), unavailable)
      await assert.rejects(
        store.create(makeUser()),
        (error: unknown) =>
          (error as { code?: unknown }).code === 'storage_unavailable' &&
          (error as { retryAfterSeconds?: unknown }).retryAfterSeconds === 5,
      )
      await assert.rejects(
        store.update(user.id, (current) => changeUser(current.user, { name: 'Never' })),
        unavailable,
      )
      await assert.rejects(store.delete(user.id), unavailable)
      assert.deepEqual(store.health(), {
        state: 'degraded',
        reason: 'the database does not answer',
      })

      await sql(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`)
      await waitFor('health ok', () => store.health().state === 'ok')
      assert.deepEqual((await store.get(user.id))?.user, user)
      assert.equal((await listAll(store)).length, 1)
    })

    it('answers 503 on /readyz and 503 storage_unavailable on /users through HTTP, then recovers', async (t) => {
      const url = await freshDatabase(t)
      const name = new URL(url).pathname.slice(1)
      const store = new PostgresStore({ url, probeIntervalMs: 50 })
      const s = await startService(t, { store })
      const user = await s.createUser()
      assert.equal((await request('GET', `${s.url}/readyz`)).status, 200)
      await sql(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`)
      await endSessions(name)
      await waitFor(
        '/readyz 503',
        async () => (await request('GET', `${s.url}/readyz`)).status === 503,
      )
      assertProblem(await s.call('GET', `/users/${user.id}`), 503, 'storage_unavailable')
      const refused = assertProblem(
        await s.call('POST', '/users', { json: { email: 'later@example.com', name: 'Later' } }),
        503,
        'storage_unavailable',
      )
      assert.ok(refused.detail.includes('nothing was changed'))
      assert.equal((await request('GET', `${s.url}/healthz`)).status, 200)
      await sql(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`)
      await waitFor(
        '/readyz 200',
        async () => (await request('GET', `${s.url}/readyz`)).status === 200,
      )
      assert.deepEqual(await s.snapshot(), [user])
    })

    it('keeps /readyz 503 while the database answers reads but takes no writes, then recovers', async (t) => {
      const url = await freshDatabase(t)
      const name = new URL(url).pathname.slice(1)
      const store = new PostgresStore({ url, probeIntervalMs: 50 })
      const s = await startService(t, { store })
      const user = await s.createUser()
      // A standby after a failover, seen from the service: every new session is read-only.
      await sql(`ALTER DATABASE ${name} SET default_transaction_read_only = on`)
      await endSessions(name)
      // The first write may meet a session ended just above, which is honestly "does not
      // answer"; the state under test is the one once the database answers, read-only.
      await waitFor('a write refused by a read-only database', async () => {
        const write = await s.call('POST', '/users', { json: { email: uniqueEmail(), name: 'Ro' } })
        assert.equal(write.status, 503, write.text)
        const readyz = await request('GET', `${s.url}/readyz`)
        assert.equal(readyz.status, 503)
        return /takes no writes/.test(readyz.json<{ detail: string }>().detail)
      })
      // Reads succeed, and the probe (every 50 ms) answers: readiness stays 503 all the same.
      for (let round = 0; round < 10; round += 1) {
        assert.equal((await s.call('GET', `/users/${user.id}`)).status, 200)
        assert.equal((await request('GET', `${s.url}/readyz`)).status, 503, `round ${round}`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      assert.deepEqual(await s.snapshot(), [user])

      await sql(`ALTER DATABASE ${name} RESET default_transaction_read_only`)
      await endSessions(name)
      await waitFor(
        '/readyz 200',
        async () => (await request('GET', `${s.url}/readyz`)).status === 200,
      )
      const created = await s.call('POST', '/users', { json: { email: uniqueEmail(), name: 'Rw' } })
      assert.equal(created.status, 201, created.text)
    })

    it('fails open() when the database cannot be reached', async (t) => {
      const url = new URL(requireDatabaseUrl())
      url.port = '1'
      const store = new PostgresStore({ url: url.toString() })
      t.after(() => store.close())
      await assert.rejects(store.open(), /ECONNREFUSED|connect/)
    })
  })

  describe('input the database refuses (SQLSTATE classes 22 and 23)', () => {
    /** A store whose users table refuses one name (23514) and, on update, one metadata value (22023). */
    async function pickyStore(t: TestContext, schema = freshSchema(t)): Promise<PostgresStore> {
      const store = newStore(t, { schema })
      await store.open()
      await sql(
        `ALTER TABLE ${schema}.users ADD CONSTRAINT no_forbidden CHECK (name <> 'Forbidden')`,
      )
      await sql(`CREATE FUNCTION ${schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.metadata::text LIKE '%refused%' THEN RAISE EXCEPTION 'refused value' USING ERRCODE = '22023'; END IF;
          RETURN NEW;
        END $$`)
      await sql(
        `CREATE TRIGGER refuse BEFORE UPDATE ON ${schema}.users FOR EACH ROW EXECUTE FUNCTION ${schema}.refuse()`,
      )
      return store
    }

    it('answers 400 bad_request naming the SQLSTATE, keeps the cause, stays healthy and changes nothing', async (t) => {
      const store = await pickyStore(t)
      const ada = await store.create(makeUser())
      const before = await snapshotStore(store)
      await assert.rejects(store.create(makeUser({ name: 'Forbidden' })), (error: unknown) => {
        const found = error as { code?: unknown; detail?: unknown; cause?: { code?: unknown } }
        return (
          found.code === 'bad_request' &&
          found.cause?.code === '23514' &&
          found.detail ===
            'The database refused a value of this request (SQLSTATE 23514, constraint no_forbidden), so nothing was changed.'
        )
      })
      await assert.rejects(
        store.update(ada.user.id, (current) =>
          changeUser(current.user, { metadata: { note: 'refused' } }),
        ),
        (error: unknown) =>
          (error as { code?: unknown }).code === 'bad_request' &&
          (error as { cause?: { code?: unknown } }).cause?.code === '22023',
      )
      assert.deepEqual(store.health(), { state: 'ok' })
      assert.deepEqual(await snapshotStore(store), before)
      const next = await store.update(ada.user.id, (current) =>
        changeUser(current.user, { metadata: { note: 'fine' } }),
      )
      assert.equal(next.user.version, 2)
    })

    it('refuses only the refused row of a group commit; the others are created', async (t) => {
      const store = await pickyStore(t)
      const good = Array.from({ length: 30 }, () => makeUser())
      const outcomes = await Promise.allSettled([
        ...good.slice(0, 15).map((user) => store.create(user)),
        store.create(makeUser({ name: 'Forbidden' })),
        ...good.slice(15).map((user) => store.create(user)),
      ])
      const codes = outcomes.map((outcome) =>
        outcome.status === 'fulfilled' ? 'created' : (outcome.reason as { code?: string }).code,
      )
      assert.deepEqual(codes, [
        ...Array.from({ length: 15 }, () => 'created'),
        'bad_request',
        ...Array.from({ length: 15 }, () => 'created'),
      ])
      assert.deepEqual(
        (await listAll(store)).map((record) => record.user.id).sort(),
        good.map((user) => user.id).sort(),
      )
      assert.deepEqual(store.health(), { state: 'ok' })
    })

    it('keeps /readyz at 200 while such requests arrive twice a second, answering each 400', async (t) => {
      const schema = freshSchema(t)
      const store = await pickyStore(t, schema)
      const s = await startService(t, { store })
      const user = await s.createUser()
      const before = await s.snapshot()
      const probes: number[] = []
      const answers: TestResponse[] = []
      const deadline = Date.now() + 2000
      const sampling = (async () => {
        while (Date.now() < deadline) {
          probes.push((await request('GET', `${s.url}/readyz`)).status)
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
      })()
      while (Date.now() < deadline) {
        answers.push(
          await s.call('POST', '/users', { json: { email: uniqueEmail(), name: 'Forbidden' } }),
        )
        answers.push(
          await s.call('PATCH', `/users/${user.id}`, {
            json: { metadata: { note: 'refused' } },
            contentType: 'application/merge-patch+json',
          }),
        )
        await new Promise((resolve) => setTimeout(resolve, 500))
      }
      await sampling
      assert.ok(answers.length >= 4, `${answers.length} bad requests`)
      assert.ok(probes.length >= 10, `${probes.length} probes`)
      assert.deepEqual(
        probes.filter((status) => status !== 200),
        [],
        `/readyz answered ${probes.join(' ')}`,
      )
      for (const res of answers) assertProblem(res, 400, 'bad_request')
      assert.deepEqual(await s.snapshot(), before)
    })
  })

  describe('event ids in commit order again (migration 5)', () => {
    it('migrates a feed numbered by transaction ids: old events and cursors stay valid, new ids come after every old one, and writers of the old release fail', async (t) => {
      const schema = freshSchema(t)
      const client = new pg.Client({ connectionString: requireDatabaseUrl() })
      await client.connect()
      const old = makeUser()
      // Ids of migration 4's numbering (id_base + xid * 65,536 + n), far above a new server's.
      const oldIds = ['65537', String(2 ** 40 + 1), String(2 ** 40 + 2)]
      try {
        await client.query(`CREATE SCHEMA ${schema}`)
        await client.query(`SET search_path TO ${schema}`)
        await client.query(
          'CREATE TABLE user_service_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
        )
        for (const [i, statements] of MIGRATIONS.slice(0, 4).entries()) {
          await client.query('BEGIN')
          for (const statement of statements) await client.query(statement)
          await client.query('INSERT INTO user_service_schema (version) VALUES ($1)', [i + 1])
          await client.query('COMMIT')
        }
        for (const [i, id] of oldIds.entries())
          await client.query(
            `INSERT INTO events (id, type, time, user_id, version) VALUES ($1, 'user.updated', $2, $3, $4)`,
            [id, old.createdAt, old.id, i + 1],
          )
      } finally {
        await client.end()
      }
      // A clock at the epoch gives no floor to the ids (idFloor): the counter then starts where
      // the migration put it, the rule this test is about.
      const store = newStore(t, { schema, now: () => 0 })
      await store.open()
      const before = await store.events.read({ limit: 10 })
      const oldHex = oldIds.map((id) => BigInt(id).toString(16).padStart(16, '0'))
      assert.deepEqual(
        before.items.map((event) => event.id),
        oldHex,
      )
      assert.equal(before.nextCursor, oldHex[2])
      const made = await store.create(makeUser())
      const after = await store.events.read({ after: before.nextCursor, limit: 10 })
      assert.deepEqual(
        after.items.map((event) => [event.id, event.userId, event.version]),
        [[(BigInt(oldIds[2] ?? '') + 1n).toString(16).padStart(16, '0'), made.user.id, 1]],
        'the next id after the newest old one',
      )
      const whole = await store.events.read({ limit: 10 })
      assert.deepEqual(
        whole.items.map((event) => event.id),
        [...oldHex, after.items[0]?.id],
      )
      // A writer of the previous release numbers its events from id_base: gone, so its write fails whole.
      await assert.rejects(
        sql(`SELECT c.id_base FROM ${schema}.event_counter c`),
        /column c.id_base does not exist/,
      )
      const versions = await sql(`SELECT max(version) AS v FROM ${schema}.user_service_schema`)
      assert.equal(versions.rows[0]?.v, SCHEMA_VERSION)
    })
  })

  describe('revocation times (migration 6)', () => {
    it('migrates a schema-5 database: its users keep exactly their fields, a revocation is stored, and writers of the old release go on', async (t) => {
      const schema = freshSchema(t)
      const client = new pg.Client({ connectionString: requireDatabaseUrl() })
      await client.connect()
      const user = makeUser({ status: 'active' })
      const oldInsert = `INSERT INTO users (id, email, email_key, name, name_key, status, metadata, created_at, updated_at, version)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
      const oldRow = (u: typeof user): unknown[] => [
        u.id,
        u.email,
        u.email.toLowerCase(),
        u.name,
        u.name.toLowerCase(),
        u.status,
        '{}',
        u.createdAt,
        u.updatedAt,
        u.version,
      ]
      try {
        await client.query(`CREATE SCHEMA ${schema}`)
        await client.query(`SET search_path TO ${schema}`)
        await client.query(
          'CREATE TABLE user_service_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
        )
        for (const [i, statements] of MIGRATIONS.slice(0, 5).entries()) {
          await client.query('BEGIN')
          for (const statement of statements) await client.query(statement)
          await client.query('INSERT INTO user_service_schema (version) VALUES ($1)', [i + 1])
          await client.query('COMMIT')
        }
        await client.query(oldInsert, oldRow(user))
      } finally {
        await client.end()
      }
      const store = newStore(t, { schema })
      await store.open()
      const versions = await sql(`SELECT max(version) AS v FROM ${schema}.user_service_schema`)
      assert.equal(versions.rows[0]?.v, SCHEMA_VERSION)
      const read = await store.get(user.id)
      assert.deepEqual(read?.user, user)
      assert.equal(read?.json.includes('tokensValidAfter'), false)
      assert.deepEqual(await store.subjectOf(user.id), {
        status: 'active',
        deleted: false,
        tokensValidAfter: undefined,
      })
      const at = '2030-01-02T03:04:05.000Z'
      await store.update(user.id, (current) => ({
        ...current.user,
        tokensValidAfter: at,
        version: current.user.version + 1,
      }))
      const stored = await sql(`SELECT tokens_valid_after FROM ${schema}.users WHERE id = $1`, [
        user.id,
      ])
      assert.deepEqual(stored.rows, [{ tokens_valid_after: at }])
      // The previous release names its columns: its inserts still work, and leave the column null.
      const other = makeUser()
      const old = new pg.Client({ connectionString: requireDatabaseUrl() })
      await old.connect()
      try {
        await old.query(`SET search_path TO ${schema}`)
        await old.query(oldInsert, oldRow(other))
      } finally {
        await old.end()
      }
      assert.deepEqual((await store.get(other.id))?.user, other)
    })
  })

  describe('versions past 32 bits (migration 3)', () => {
    it('migrates a schema-2 database: its users keep their versions and can go past 2^31 - 1', async (t) => {
      const schema = freshSchema(t)
      const client = new pg.Client({ connectionString: requireDatabaseUrl() })
      await client.connect()
      const user = makeUser({ version: 2 ** 31 - 1 })
      try {
        await client.query(`CREATE SCHEMA ${schema}`)
        await client.query(`SET search_path TO ${schema}`)
        await client.query(
          'CREATE TABLE user_service_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
        )
        for (const [i, statements] of MIGRATIONS.slice(0, 2).entries()) {
          for (const statement of statements) await client.query(statement)
          await client.query('INSERT INTO user_service_schema (version) VALUES ($1)', [i + 1])
        }
        await client.query(
          `INSERT INTO users (id, email, email_key, name, name_key, status, metadata, created_at, updated_at, version)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
          [
            user.id,
            user.email,
            user.email.toLowerCase(),
            user.name,
            user.name.toLowerCase(),
            user.status,
            '{}',
            user.createdAt,
            user.updatedAt,
            user.version,
          ],
        )
      } finally {
        await client.end()
      }
      const store = newStore(t, { schema })
      await store.open()
      const types = await sql(
        `SELECT table_name, data_type FROM information_schema.columns
        WHERE table_schema = $1 AND column_name = 'version' AND table_name IN ('users', 'events') ORDER BY 1`,
        [schema],
      )
      assert.deepEqual(types.rows, [
        { table_name: 'events', data_type: 'bigint' },
        { table_name: 'users', data_type: 'bigint' },
      ])
      assert.deepEqual((await store.get(user.id))?.user, user)
      const next = await store.update(user.id, (current) =>
        changeUser(current.user, { name: 'Past 32 bits' }),
      )
      assert.equal(next.user.version, 2 ** 31)
      assert.deepEqual(await store.get(user.id), next)
      const events = await store.events.read({ limit: 10 })
      assert.deepEqual(
        events.items.map((event) => [event.type, event.version]),
        [['user.updated', 2 ** 31]],
      )
    })

    it('stores the deletion event of a user at MAX_USER_VERSION with version MAX_VERSION, read back exactly', async (t) => {
      const store = newStore(t)
      await store.open()
      const top = await store.create(makeUser({ version: MAX_USER_VERSION }))
      await store.delete(top.user.id)
      const events = await store.events.read({ limit: 10 })
      assert.deepEqual(
        events.items.map((event) => [event.type, event.version]),
        [
          ['user.created', MAX_USER_VERSION],
          ['user.deleted', MAX_VERSION],
        ],
      )
    })

    it('refuses a version past MAX_VERSION in the database too (users_version_range)', async (t) => {
      const schema = freshSchema(t)
      const store = newStore(t, { schema })
      await store.open()
      const user = await store.create(makeUser())
      await assert.rejects(
        sql(`UPDATE ${schema}.users SET version = $1 WHERE id = $2`, [
          '9007199254740992',
          user.user.id,
        ]),
        (error: unknown) =>
          (error as { code?: unknown; constraint?: unknown }).code === '23514' &&
          (error as { constraint?: unknown }).constraint === 'users_version_range',
      )
    })
  })

  describe('the data directory lock', () => {
    it("is the service's, not the store's: DATA_DIR is held while open, a second service is refused, and it is released on close", async (t) => {
      const dataDir = path.join(await makeTempDir(t), 'data')
      const databaseUrl = await freshDatabase(t)
      const first = createUserService({ databaseUrl, dataDir, secret: TEST_SECRET })
      assert.equal(first.store.capabilities.dataDir, undefined)
      await first.open()
      assert.ok(existsSync(dataDir))
      assert.equal((await listLockFiles(dataDir)).length, 1)
      const second = createUserService({ databaseUrl, dataDir, secret: TEST_SECRET })
      await assert.rejects(second.open(), { name: 'LockError' })
      await first.close()
      assert.deepEqual(await listLockFiles(dataDir), [])
      await second.close()
      const third = createUserService({ databaseUrl, dataDir, secret: TEST_SECRET })
      await third.open()
      assert.equal((await listLockFiles(dataDir)).length, 1)
      await third.close()
      assert.deepEqual(await listLockFiles(dataDir), [])
    })
  })
})
