import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { assertProblem, type TestResponse, type UserPage } from '../helpers/http.js'
import { makeTempDir, startService, type TestService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { assertUnchangedBy, readNextLink } from '../helpers/users-suite.js'

const OTHER_SECRET = 'another-secret-for-listing-tests-0123456789'

/** A service on a memory store: listing needs no disk, and seeding is faster without fsync. */
function startMemoryService(t: TestContext, basePath?: string): Promise<TestService> {
  return startService(t, {
    store: new MemoryStore(),
    ...(basePath === undefined ? {} : { basePath }),
  })
}

async function seed(s: TestService, count: number, tag = 'seed'): Promise<User[]> {
  const users: User[] = []
  for (let i = 0; i < count; i += 1)
    users.push(await s.createUser({ email: `${tag}.${i}@example.com`, name: `${tag} ${i}` }))
  return users
}

interface Listed {
  res: TestResponse
  page: UserPage
}

async function list(s: TestService, query: string): Promise<Listed> {
  const res = await s.call('GET', `/users${query}`)
  assert.equal(res.status, 200, `GET /users${query}: ${res.text}`)
  const page = res.json<UserPage>()
  assert.ok(Array.isArray(page.items))
  assert.ok(page.nextCursor === null || typeof page.nextCursor === 'string')
  return { res, page }
}

const idsOf = (users: readonly User[]): string[] => users.map((user) => user.id)

/** Asserts a 400 bad_request whose detail names `parameter`, with nothing changed. */
async function assertBadQuery(s: TestService, query: string, parameter: string): Promise<void> {
  const res = await assertUnchangedBy(s, () => s.call('GET', `/users${query}`))
  const problem = assertProblem(res, 400, 'bad_request')
  assert.ok(problem.detail.includes(parameter), `the detail names ${parameter}: ${problem.detail}`)
}

/** Follows nextCursor from `first` to the end (optionally with a limit), returning every item and the pages. */
async function walkCursors(
  s: TestService,
  first: string,
  limit?: number,
): Promise<{ items: User[]; pages: Listed[] }> {
  const pages: Listed[] = []
  let listed = await list(s, first)
  pages.push(listed)
  while (listed.page.nextCursor !== null) {
    const limitPart = limit === undefined ? '' : `&limit=${limit}`
    listed = await list(s, `?cursor=${listed.page.nextCursor}${limitPart}`)
    pages.push(listed)
    assert.ok(pages.length < 1000, 'the walk ends')
  }
  return { items: pages.flatMap((entry) => entry.page.items), pages }
}

describe('GET /users: limit', () => {
  it('returns 20 users by default, with a next cursor', async (t) => {
    const s = await startMemoryService(t)
    const users = await seed(s, 25)
    const { res, page } = await list(s, '')
    assert.deepEqual(page.items, users.slice(0, 20))
    assert.equal(typeof page.nextCursor, 'string')
    assert.equal(res.headers.get('cache-control'), 'private, no-cache')
    const rest = await list(s, `?cursor=${page.nextCursor ?? ''}`)
    assert.deepEqual(rest.page.items, users.slice(20))
    assert.equal(rest.page.nextCursor, null)
  })

  it('takes limits from 1 to 100', async (t) => {
    const s = await startMemoryService(t)
    const users = await seed(s, 25)
    assert.deepEqual((await list(s, '?limit=1')).page.items, users.slice(0, 1))
    assert.deepEqual((await list(s, '?limit=7')).page.items, users.slice(0, 7))
    const all = await list(s, '?limit=100')
    assert.deepEqual(all.page.items, users)
    assert.equal(all.page.nextCursor, null)
  })

  it('refuses limits that are not whole numbers from 1 to 100, naming limit', async (t) => {
    const s = await startMemoryService(t)
    await seed(s, 2)
    const values = ['0', '101', '-1', 'abc', '1.5', '20abc', '', '%201', '1&limit=2']
    for (const query of [...values.map((value) => `?limit=${value}`), '?limit']) {
      await t.test(query, () => assertBadQuery(s, query, 'limit'))
    }
  })

  it('refuses unknown parameters, naming them', async (t) => {
    const s = await startMemoryService(t)
    const cases = [
      ['?page=2', 'page'],
      ['?limit=5&offset=10', 'offset'],
      ['?Status=active', 'Status'],
      ['?name=Ada', 'name'],
    ]
    for (const [query = '', name = ''] of cases) {
      await t.test(query, () => assertBadQuery(s, query, name))
    }
  })

  it('answers an empty list with no cursor and no Link', async (t) => {
    const s = await startMemoryService(t)
    const { res, page } = await list(s, '')
    assert.deepEqual(page, { items: [], nextCursor: null })
    assert.equal(res.headers.get('link'), null)
  })
})

describe('GET /users: filters and sort', () => {
  interface People {
    s: TestService
    ada: User
    grace: User
    alan: User
    adam: User
    other: User
  }

  async function people(t: TestContext): Promise<People> {
    const s = await startMemoryService(t)
    const ada = await s.createUser({ email: 'Ada.Lovelace@Example.com', name: 'Ada Lovelace' })
    const grace = await s.createUser({ email: 'grace@navy.mil', name: 'Grace Hopper' })
    const alan = await s.createUser({ email: 'alan@example.org', name: 'Alan Turing' })
    const adam = await s.createUser({ email: 'adam@example.net', name: 'Adam Smith' })
    const other = await s.createUser({ email: 'someone@ada.dev', name: 'Someone' })
    const setStatus = async (user: User, actions: string[]): Promise<User> => {
      for (const action of actions)
        assert.equal((await s.call('POST', `/users/${user.id}:${action}`)).status, 200)
      return s.getUser(user.id)
    }
    return {
      s,
      ada: await setStatus(ada, ['activate']),
      grace: await setStatus(grace, ['activate', 'suspend']),
      alan,
      adam,
      other: await setStatus(other, ['activate']),
    }
  }

  it('filters by one status or a comma list', async (t) => {
    const { s, ada, grace, alan, adam, other } = await people(t)
    const cases: Array<[string, User[]]> = [
      ['active', [ada, other]],
      ['pending', [alan, adam]],
      ['suspended', [grace]],
      ['pending,suspended', [grace, alan, adam]],
      ['suspended,active,pending', [ada, grace, alan, adam, other]],
    ]
    for (const [status, expected] of cases) {
      const { page } = await list(s, `?status=${status}`)
      assert.deepEqual(page.items, expected, status)
      for (const user of page.items) assert.ok(status.includes(user.status))
    }
  })

  it('refuses an unknown status, naming status', async (t) => {
    const { s } = await people(t)
    for (const query of ['?status=deleted', '?status=Active', '?status=active,', '?status=']) {
      await assertBadQuery(s, query, 'status')
    }
  })

  it('matches email exactly, ignoring case', async (t) => {
    const { s, ada } = await people(t)
    for (const email of [
      'Ada.Lovelace@Example.com',
      'ada.lovelace@example.com',
      'ADA.LOVELACE%40EXAMPLE.COM',
    ]) {
      assert.deepEqual((await list(s, `?email=${email}`)).page.items, [ada], email)
    }
    for (const email of [
      'ada.lovelace@example.co',
      'da.lovelace@example.com',
      'ada.lovelace@example.com.',
      'ada',
      'example.com',
    ]) {
      assert.deepEqual((await list(s, `?email=${email}`)).page.items, [], email)
    }
  })

  it('matches q as a case-insensitive substring of name or email', async (t) => {
    const { s, ada, grace, adam, other, alan } = await people(t)
    const cases: Array<[string, User[]]> = [
      ['ADA', [ada, adam, other]],
      ['hopper', [grace]],
      ['NAVY.MIL', [grace]],
      ['Lovelace%40', [ada]],
      ['n+T', [alan]],
      ['example', [ada, alan, adam]],
      ['zzz', []],
    ]
    for (const [q, expected] of cases)
      assert.deepEqual((await list(s, `?q=${q}`)).page.items, expected, q)
  })

  it('finds q as sent in a Greek name or email, whatever the case of its sigmas', async (t) => {
    const s = await startMemoryService(t)
    const upper = await s.createUser({ email: 'ΚΟΣΜΟΣ@example.gr', name: 'ΑΣΑ ΟΔΟΣ' })
    const lower = await s.createUser({ email: 'kosmos@example.gr', name: 'ασα οδοσ' })
    const cases: Array<[string, User[]]> = [
      ['ΑΣ', [upper, lower]],
      ['ας', [upper, lower]],
      ['ΟΔΟΣ', [upper, lower]],
      ['ΚΟΣ', [upper]],
      ['ΜΟΣ@', [upper]],
    ]
    for (const [q, expected] of cases) {
      const { page } = await list(s, `?q=${encodeURIComponent(q)}`)
      assert.deepEqual(page.items, expected, q)
    }
  })

  it('combines filters with AND', async (t) => {
    const { s, ada, adam, other } = await people(t)
    assert.deepEqual((await list(s, '?status=active&q=ada')).page.items, [ada, other])
    assert.deepEqual((await list(s, '?status=pending&q=ada')).page.items, [adam])
    assert.deepEqual(
      (await list(s, '?status=active&email=ada.lovelace@example.com&q=love')).page.items,
      [ada],
    )
    assert.deepEqual(
      (await list(s, '?status=pending&email=ada.lovelace@example.com')).page.items,
      [],
    )
    assert.deepEqual((await list(s, '?email=ada.lovelace@example.com&q=hopper')).page.items, [])
  })

  it('sorts by createdAt, oldest first by default, newest first with -createdAt', async (t) => {
    const { s, ada, grace, alan, adam, other } = await people(t)
    const oldestFirst = [ada, grace, alan, adam, other]
    assert.deepEqual((await list(s, '')).page.items, oldestFirst)
    assert.deepEqual((await list(s, '?sort=createdAt')).page.items, oldestFirst)
    assert.deepEqual((await list(s, '?sort=-createdAt')).page.items, [...oldestFirst].reverse())
    assert.deepEqual((await list(s, '?sort=-createdAt&status=pending')).page.items, [adam, alan])
    const created = oldestFirst.map((user) => user.createdAt)
    assert.deepEqual(created, [...created].sort())
  })

  it('refuses another sort, naming sort', async (t) => {
    const { s } = await people(t)
    for (const query of [
      '?sort=name',
      '?sort=createdat',
      '?sort=%2BcreatedAt',
      '?sort=',
      '?sort=createdAt&sort=-createdAt',
    ]) {
      await assertBadQuery(s, query, 'sort')
    }
  })

  it('pages through a filtered list a user at a time', async (t) => {
    const { s, ada, adam, other } = await people(t)
    const { items, pages } = await walkCursors(s, '?q=ada&limit=1&sort=-createdAt', 1)
    assert.deepEqual(items, [other, adam, ada])
    assert.equal(pages.length, 3)
  })
})

describe('GET /users: paging', () => {
  it('sends nextCursor and a Link to the next page, and neither on the last page', async (t) => {
    const s = await startMemoryService(t)
    const users = await seed(s, 7)
    const { items, pages } = await walkCursors(s, '?limit=3', 3)
    assert.deepEqual(items, users)
    assert.deepEqual(
      pages.map((entry) => entry.page.items.length),
      [3, 3, 1],
    )
    for (const entry of pages.slice(0, -1)) {
      assert.equal(typeof entry.page.nextCursor, 'string')
      const link = readNextLink(entry.res)
      assert.ok(link !== undefined, 'a Link header')
      assert.ok(link.includes(`cursor=${entry.page.nextCursor ?? ''}`), link)
    }
    const last = pages[pages.length - 1]
    assert.ok(last !== undefined)
    assert.equal(last.page.nextCursor, null)
    assert.equal(last.res.headers.get('link'), null)
  })

  it('sends no cursor when the last page ends exactly on the last user', async (t) => {
    const s = await startMemoryService(t)
    const users = await seed(s, 6)
    const first = await list(s, '?limit=3')
    assert.deepEqual(first.page.items, users.slice(0, 3))
    const second = await list(s, `?limit=3&cursor=${first.page.nextCursor ?? ''}`)
    assert.deepEqual(second.page.items, users.slice(3))
    assert.equal(second.page.nextCursor, null)
    assert.equal(second.res.headers.get('link'), null)
    const whole = await list(s, '?limit=6')
    assert.equal(whole.page.nextCursor, null)
    assert.equal(whole.res.headers.get('link'), null)
  })

  it('gives the same pages through Link as through nextCursor', async (t) => {
    for (const basePath of ['', '/v1']) {
      await t.test(basePath === '' ? 'no base path' : `base path ${basePath}`, async (t2) => {
        const s = await startMemoryService(t2, basePath === '' ? undefined : basePath)
        const users = await seed(s, 5)
        let listed = await list(s, '?limit=2&sort=-createdAt')
        const viaLink: User[] = [...listed.page.items]
        for (;;) {
          const link = readNextLink(listed.res)
          if (link === undefined) break
          const target = new URL(link, s.url)
          assert.equal(target.pathname, `${basePath}/users`)
          const byCursor = await list(s, `?limit=2&cursor=${listed.page.nextCursor ?? ''}`)
          const res = await s.call('GET', target.href)
          assert.equal(res.status, 200, res.text)
          assert.equal(res.text, byCursor.res.text)
          listed = { res, page: res.json<UserPage>() }
          viaLink.push(...listed.page.items)
        }
        assert.deepEqual(viaLink, [...users].reverse())
      })
    }
  })

  it('lets a cursor sent alone carry its filters and sort', async (t) => {
    const s = await startMemoryService(t)
    const users = await seed(s, 9)
    const active = users.filter((_, i) => i % 2 === 0)
    for (const user of active)
      assert.equal((await s.call('POST', `/users/${user.id}:activate`)).status, 200)
    const expected = (await Promise.all(active.map((user) => s.getUser(user.id)))).reverse()
    const { items } = await walkCursors(s, '?status=active&sort=-createdAt&limit=2', 2)
    assert.deepEqual(items, expected)
    const extras = await seed(s, 3, 'Extra')
    const byQ = await walkCursors(s, '?q=extra&limit=1', 1)
    assert.deepEqual(byQ.items, extras)
    assert.equal(byQ.pages.length, 3)
  })

  it('accepts a cursor with its own filters and sort, and refuses it with others', async (t) => {
    const s = await startMemoryService(t)
    await seed(s, 4)
    // An email filter names one user, so it never has a next page: the walk filters on the rest.
    const { page: walk } = await list(s, '?status=pending,active&q=SEED&sort=-createdAt&limit=1')
    const cursor = walk.nextCursor
    assert.ok(cursor !== null)
    for (const same of [
      '',
      '&status=active,pending',
      '&q=seed',
      '&sort=-createdAt',
      '&status=pending,active&q=Seed&sort=-createdAt',
    ]) {
      const { page: next } = await list(s, `?cursor=${cursor}${same}&limit=1`)
      assert.equal(next.items.length, 1, same)
    }
    for (const other of [
      '&status=pending',
      '&status=active',
      '&sort=createdAt',
      '&q=see',
      '&email=seed.0@example.com',
    ]) {
      await assertBadQuery(s, `?cursor=${cursor}${other}`, 'cursor')
    }
  })

  it('lets the limit change from page to page', async (t) => {
    const s = await startMemoryService(t)
    const users = await seed(s, 10)
    const items: User[] = []
    let cursor: string | null = null
    for (const limit of [1, 4, 2, 100]) {
      const { page }: Listed = await list(
        s,
        `?limit=${limit}${cursor === null ? '' : `&cursor=${cursor}`}`,
      )
      assert.ok(page.items.length <= limit)
      items.push(...page.items)
      cursor = page.nextCursor
    }
    assert.equal(cursor, null)
    assert.deepEqual(items, users)
  })

  it('refuses tampered, truncated, extended and garbage cursors, naming cursor', async (t) => {
    const s = await startMemoryService(t)
    await seed(s, 3)
    const cursor = (await list(s, '?limit=1')).page.nextCursor
    assert.ok(cursor !== null)
    const middle = Math.floor(cursor.length / 3)
    const flipped = `${cursor.slice(0, middle)}${cursor[middle] === 'A' ? 'B' : 'A'}${cursor.slice(middle + 1)}`
    const cases = [
      flipped,
      `${cursor.slice(0, -1)}${cursor.endsWith('A') ? 'B' : 'A'}`,
      cursor.slice(0, -2),
      cursor.slice(0, cursor.indexOf('.')),
      cursor.slice(1),
      `${cursor}AA`,
      `${cursor}.AA`,
      'garbage',
      'a.b',
      '%7B%7D',
      '%',
      '%E0%A4',
      '',
    ]
    for (const bad of cases) await assertBadQuery(s, `?cursor=${bad}`, 'cursor')
  })

  it('refuses a cursor made by a service with another secret', async (t) => {
    const a = await startMemoryService(t)
    await seed(a, 3)
    const cursor = (await list(a, '?limit=1')).page.nextCursor
    assert.ok(cursor !== null)
    const b = await startService(t, { store: new MemoryStore(), secret: OTHER_SECRET })
    const token = makeToken({ secret: OTHER_SECRET })
    assert.equal(
      (await b.call('GET', '/users?limit=1', { token })).status,
      200,
      'b takes its own token',
    )
    const res = await b.call('GET', `/users?cursor=${cursor}`, { token })
    const problem = assertProblem(res, 400, 'bad_request')
    assert.match(problem.detail, /cursor/)
  })

  it('keeps a cursor valid after the service is closed and reopened on the same data', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const first = await startService(t, { dataDir })
    const users = await seed(first, 5)
    const { page } = await list(first, '?limit=2&sort=-createdAt')
    assert.ok(page.nextCursor !== null)
    await first.service.close()

    const second = await startService(t, { dataDir })
    const { items } = await walkCursors(second, `?cursor=${page.nextCursor}&limit=2`, 2)
    assert.deepEqual([...page.items, ...items], [...users].reverse())
  })

  for (const sort of ['createdAt', '-createdAt'] as const) {
    it(`returns every user that existed throughout exactly once while others come and go (sort=${sort}, page by page)`, async (t) => {
      const s = await startMemoryService(t)
      const seeded = await seed(s, 45)
      const doomed = seeded.filter((_, i) => i % 3 === 1).map((user) => user.id)
      const stable = new Set(seeded.filter((_, i) => i % 3 !== 1).map((user) => user.id))
      const everyId = new Set(idsOf(seeded))
      const seen: string[] = []
      let cursor: string | null = null
      let round = 0
      do {
        const listed: Listed = await list(
          s,
          `?limit=4&sort=${sort}${cursor === null ? '' : `&cursor=${cursor}`}`,
        )
        seen.push(...idsOf(listed.page.items))
        cursor = listed.page.nextCursor
        // Delete one user behind the walk and one ahead of it, and create two.
        for (const id of [doomed.shift(), doomed.pop()]) {
          if (id !== undefined) assert.equal((await s.call('DELETE', `/users/${id}`)).status, 204)
        }
        for (let i = 0; i < 2; i += 1)
          everyId.add((await s.createUser({ email: `late.${round}.${i}@example.com` })).id)
        round += 1
      } while (cursor !== null)
      assertWalk(seen, stable, everyId)
    })
  }

  it('returns every user that existed throughout exactly once to two walks whose pages are fetched while users are created and deleted', async (t) => {
    const s = await startMemoryService(t)
    const seeded = await seed(s, 60)
    const doomed = seeded.filter((_, i) => i % 4 === 0).map((user) => user.id)
    const stable = new Set(seeded.filter((_, i) => i % 4 !== 0).map((user) => user.id))
    const everyId = new Set(idsOf(seeded))
    const ascending: string[] = []
    const descending: string[] = []
    // undefined: the walk has not begun; null: it has ended.
    let ascendingCursor: string | null | undefined
    let descendingCursor: string | null | undefined
    const step = async (
      sort: string,
      cursor: string | null | undefined,
      seen: string[],
    ): Promise<string | null> => {
      if (cursor === null) return null
      const listed: Listed = await list(
        s,
        `?limit=3&sort=${sort}${cursor === undefined ? '' : `&cursor=${cursor}`}`,
      )
      seen.push(...idsOf(listed.page.items))
      return listed.page.nextCursor
    }
    let rounds = 0
    let deletions = 0
    while (ascendingCursor !== null || descendingCursor !== null) {
      // In each round the next page of both walks is asked for while one user is created and one
      // deleted (alternately behind and ahead of the walks), all in flight at once.
      const id = rounds % 2 === 0 ? doomed.shift() : doomed.pop()
      const [nextAscending, nextDescending, created, deleted] = await Promise.all([
        step('createdAt', ascendingCursor, ascending),
        step('-createdAt', descendingCursor, descending),
        s.createUser({ email: `concurrent.${rounds}@example.com` }),
        id === undefined ? undefined : s.call('DELETE', `/users/${id}`),
      ])
      everyId.add(created.id)
      if (deleted !== undefined) {
        assert.equal(deleted.status, 204, deleted.text)
        deletions += 1
      }
      ascendingCursor = nextAscending
      descendingCursor = nextDescending
      rounds += 1
      assert.ok(rounds < 200, 'the walks end')
    }
    assert.equal(deletions, 15, 'every doomed user was deleted while the walks were under way')
    assert.ok(rounds > 15, `users were created in each of the ${rounds} rounds of the walks`)
    assertWalk(ascending, stable, everyId)
    assertWalk(descending, stable, everyId)
    const remaining = new Set(idsOf(await s.snapshot()))
    for (const id of stable) assert.ok(remaining.has(id), `the stable user ${id} is still there`)
  })
})

/** Each stable user exactly once, nobody twice, and nobody who never existed. */
function assertWalk(
  seen: readonly string[],
  stable: ReadonlySet<string>,
  everyId: ReadonlySet<string>,
): void {
  assert.equal(new Set(seen).size, seen.length, 'no user is returned twice')
  for (const id of stable) assert.ok(seen.includes(id), `the stable user ${id} is returned`)
  for (const id of seen) assert.ok(everyId.has(id), `${id} existed`)
}
