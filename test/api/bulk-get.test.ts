import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { UserRecord } from '../../src/domain/user.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import { assertProblem, type UserPage } from '../helpers/http.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../helpers/postgres.js'
import { startService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const UNKNOWN = '00000000-0000-7000-8000-000000000000'

describe('GET /users?ids=', () => {
  it('answers the users that exist, in the order asked, as one page without a next cursor', async (t) => {
    const app = await startService(t)
    const a = await app.createUser()
    const b = await app.createUser()
    const c = await app.createUser()
    const res = await app.call('GET', `/users?ids=${c.id},${UNKNOWN},${a.id},%20${b.id},${c.id}`)
    assert.equal(res.status, 200, res.text)
    assert.equal(res.headers.get('link'), null)
    const page = res.json<UserPage>()
    assert.deepEqual(
      page.items.map((user) => user.id),
      [c.id, a.id, b.id],
    )
    assert.deepEqual(page.items[1], a)
    assert.equal(page.nextCursor, null)
  })

  it('answers an empty page when no id exists, and asks the store for each batch in one call', async (t) => {
    const asked: string[][] = []
    // getMany is part of every store (no store is asked per id): count the batches it gets.
    class BatchStore extends MemoryStore {
      override getMany(ids: readonly string[]): Promise<UserRecord[]> {
        asked.push([...ids])
        return super.getMany(ids)
      }
    }
    const app = await startService(t, { store: new BatchStore() })
    const a = await app.createUser()
    const empty = await app.call('GET', `/users?ids=${UNKNOWN}`)
    assert.equal(empty.status, 200)
    assert.deepEqual(empty.json<UserPage>(), { items: [], nextCursor: null })
    const one = await app.call('GET', `/users?ids=${UNKNOWN},${a.id}`)
    assert.deepEqual(
      one.json<UserPage>().items.map((user) => user.id),
      [a.id],
    )
    assert.deepEqual(asked, [[UNKNOWN], [UNKNOWN, a.id]])
  })

  it('answers 400 naming ids for a malformed id, an empty item or more than 100 ids', async (t) => {
    const app = await startService(t)
    for (const query of [
      'ids=not-a-uuid',
      `ids=${UNKNOWN},`,
      'ids=0000000A-0000-7000-8000-00000000000B',
      `ids=${Array.from({ length: 101 }, () => UNKNOWN).join(',')}`,
    ]) {
      const problem = assertProblem(await app.call('GET', `/users?${query}`), 400, 'bad_request')
      assert.match(problem.detail, /\bids\b/, query)
    }
    const hundred = await app.call(
      'GET',
      `/users?ids=${Array.from({ length: 100 }, () => UNKNOWN).join(',')}`,
    )
    assert.equal(hundred.status, 200)
  })

  it('answers 400 naming the conflict when ids comes with a filter, a cursor or a limit', async (t) => {
    const app = await startService(t)
    for (const other of [
      'status=active',
      'cursor=abc',
      'email=a@example.com',
      'q=x',
      'sort=-createdAt',
      'limit=5',
    ]) {
      const name = other.split('=')[0] ?? ''
      const problem = assertProblem(
        await app.call('GET', `/users?ids=${UNKNOWN}&${other}`),
        400,
        'bad_request',
      )
      assert.match(problem.detail, new RegExp(`ids cannot be combined with ${name}`))
    }
  })

  it('needs the users:read scope', async (t) => {
    const app = await startService(t)
    const res = await app.call('GET', `/users?ids=${UNKNOWN}`, {
      token: makeToken({ scope: 'users:write' }),
    })
    assertProblem(res, 403, 'insufficient_scope')
  })
})

describe('GET /users?ids= on PostgreSQL', { skip: SKIP_POSTGRES }, () => {
  it('answers the users that exist in the order asked, from one query', async (t) => {
    const store = new PostgresStore({ url: requireDatabaseUrl(), schema: freshSchema(t) })
    const app = await startService(t, { store })
    const a = await app.createUser({ metadata: { z: '1', a: '2' } })
    const b = await app.createUser()
    const res = await app.call('GET', `/users?ids=${b.id},${UNKNOWN},${a.id}`)
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(res.json<UserPage>(), { items: [b, a], nextCursor: null })
    assert.equal(res.text.includes('"metadata":{"z":"1","a":"2"}'), true)
  })
})
