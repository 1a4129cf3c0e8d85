import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import pg from 'pg'

import type { User } from '../../src/domain/user.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import { assertProblem, type TestResponse } from '../helpers/http.js'
import { CountingStore } from '../helpers/ops.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../helpers/postgres.js'
import { startService, type TestService } from '../helpers/service.js'
import { STORES } from '../helpers/store-cases.js'
import { makeToken, nowSeconds } from '../helpers/tokens.js'

// GET /users/{id} with a token whose subject is a user reads the user and checks the subject in
// one store call (one statement on PostgreSQL): these tests show that the check is as exact as
// on every other route, and that it costs one call.

const UNKNOWN_ID = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'

function assertUser(res: TestResponse, expected: User): void {
  assert.equal(res.status, 200, res.text)
  assert.deepEqual(res.json<User>(), expected)
  assert.equal(res.headers.get('etag'), `"v${expected.version}"`)
}

function assertRevoked(res: TestResponse): void {
  assertProblem(res, 401, 'token_revoked')
  assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/)
}

async function change(s: TestService, path: string): Promise<User> {
  const res = await s.call('POST', path)
  assert.equal(res.status, 200, res.text)
  return res.json<User>()
}

/**
 * The subject `who` reads itself and `other` on `reader` after each change `writer` makes to it:
 * each refusal is seen at the reader's next request. One service may be both.
 */
async function walkSubject(writer: TestService, reader: TestService): Promise<void> {
  const who = await writer.createUser()
  const other = await writer.createUser()
  const token = makeToken({ sub: who.id, nowS: nowSeconds() - 1 })
  const read = (id: string): Promise<TestResponse> => reader.call('GET', `/users/${id}`, { token })
  assertUser(await read(who.id), who)
  assertUser(await read(other.id), other)
  assertProblem(await read(UNKNOWN_ID), 404, 'not_found')
  // A subject's 401 comes before a missing scope's 403.
  const narrow = makeToken({ sub: who.id, scope: 'events:read', nowS: nowSeconds() - 1 })
  assertProblem(
    await reader.call('GET', `/users/${other.id}`, { token: narrow }),
    403,
    'insufficient_scope',
  )

  await change(writer, `/users/${who.id}:activate`)
  const suspended = await change(writer, `/users/${who.id}:suspend`)
  for (const id of [who.id, other.id, UNKNOWN_ID])
    assertProblem(await read(id), 403, 'subject_suspended')
  await change(writer, `/users/${who.id}:activate`)
  assertUser(await reader.call('GET', `/users/${other.id}`, { token }), other)

  const revoked = await change(writer, `/users/${who.id}:revokeTokens`)
  assert.ok(revoked.version > suspended.version)
  for (const id of [who.id, other.id, UNKNOWN_ID]) assertRevoked(await read(id))
  assertRevoked(await reader.call('GET', `/users/${other.id}`, { token: narrow }))
  // A token issued at the new value is served, and sees the user as stored now.
  const fresh = makeToken({ sub: who.id, nowS: Date.parse(revoked.tokensValidAfter ?? '') / 1000 })
  assertUser(await reader.call('GET', `/users/${who.id}`, { token: fresh }), revoked)

  assert.equal((await writer.call('DELETE', `/users/${who.id}`)).status, 204)
  for (const id of [who.id, other.id, UNKNOWN_ID])
    assertProblem(
      await reader.call('GET', `/users/${id}`, { token: fresh }),
      403,
      'subject_deleted',
    )
  // An id as sent that is not canonical (percent-encoded) is checked the same way.
  const encoded = `%${other.id.charCodeAt(0).toString(16)}${other.id.slice(1)}`
  assertProblem(
    await reader.call('GET', `/users/${encoded}`, { token: fresh }),
    403,
    'subject_deleted',
  )
  assertUser(await reader.call('GET', `/users/${encoded}`), other)
}

for (const store of STORES) {
  describe(`GET /users/{id} by a user's token on the ${store.name} store`, {
    skip: store.skip,
  }, () => {
    const start = (t: TestContext): Promise<TestService> => startService(t, store.make(t))

    it('answers the user, or refuses a suspended, revoked or deleted subject at the next request', async (t) => {
      const s = await start(t)
      await walkSubject(s, s)
    })
  })
}

describe('GET /users/{id} by a user’s token makes one store call', () => {
  it('on the memory store: one call, where the subject check and the read were two', async (t) => {
    const store = new CountingStore()
    const s = await startService(t, { store })
    const who = await s.createUser()
    const other = await s.createUser()
    const token = makeToken({ sub: who.id })
    for (const id of [who.id, other.id, UNKNOWN_ID]) {
      store.calls = 0
      const res = await s.call('GET', `/users/${id}`, { token })
      assert.equal(res.status, id === UNKNOWN_ID ? 404 : 200, res.text)
      assert.equal(store.calls, 1, `store calls for GET /users/${id}`)
    }
  })

  it('on PostgreSQL: one statement, named and prepared', { skip: SKIP_POSTGRES }, async (t) => {
    const statements: string[] = []
    class RecordingPool extends pg.Pool {
      constructor(config?: pg.PoolConfig) {
        super(config)
        this.on('connect', (client) => {
          const query = client.query.bind(client) as (...args: unknown[]) => unknown
          Object.assign(client, {
            query: (...args: unknown[]) => {
              const [config] = args
              const name = (config as { name?: unknown } | null)?.name
              const text = typeof name === 'string' ? name : String(config)
              // The change feed's and the webhook listing's own polls run beside the requests:
              // only the users' statements count.
              if (!/^(events|webhooks)_/.test(text)) statements.push(text)
              return query(...args)
            },
          })
        })
      }
    }
    const pgStore = new PostgresStore({
      url: requireDatabaseUrl(),
      schema: freshSchema(t),
      probeIntervalMs: 600_000,
      pg: { Pool: RecordingPool } as unknown as typeof pg,
    })
    t.after(() => pgStore.close())
    const s = await startService(t, { store: pgStore })
    const who = await s.createUser()
    const other = await s.createUser()
    const token = makeToken({ sub: who.id })
    for (const id of [who.id, other.id, UNKNOWN_ID]) {
      statements.length = 0
      const res = await s.call('GET', `/users/${id}`, { token })
      assert.equal(res.status, id === UNKNOWN_ID ? 404 : 200, res.text)
      assert.deepEqual(statements, ['users_get_as'], `statements for GET /users/${id}`)
    }
    // A token whose subject is not a user: the read alone.
    statements.length = 0
    assert.equal((await s.call('GET', `/users/${other.id}`)).status, 200)
    assert.deepEqual(statements, ['users_get'])
  })
})

describe('GET /users/{id} on two PostgreSQL replicas', { skip: SKIP_POSTGRES }, () => {
  it("sees the subject's suspension, revocation and deletion made on the other at its next request", async (t) => {
    const schema = freshSchema(t)
    const make = (): PostgresStore => {
      const store = new PostgresStore({ url: requireDatabaseUrl(), schema })
      t.after(() => store.close())
      return store
    }
    const a = await startService(t, { store: make() })
    const b = await startService(t, { store: make() })
    await walkSubject(a, b)
  })
})
