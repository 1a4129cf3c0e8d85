import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import type { UserPage } from '../helpers/http.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'

const BUDGET = 50
const RARE = 'zyxrare'

interface Walk {
  readonly pages: UserPage[]
  readonly ids: string[]
  /** The Link header of each page, null when it has none. */
  readonly links: Array<string | null>
}

/**
 * Follows nextCursor from the first page to null, sending the cursor with the same limit only
 * (the cursor carries its filters and sort).
 */
async function walk(s: TestService, query: string): Promise<Walk> {
  const limit = new URLSearchParams(query).get('limit')
  const pages: UserPage[] = []
  const links: Array<string | null> = []
  let target = `/users?${query}`
  for (;;) {
    const res = await s.call('GET', target)
    assert.equal(res.status, 200, `${target}: ${res.text}`)
    const page = res.json<UserPage>()
    pages.push(page)
    links.push(res.headers.get('link'))
    if (page.nextCursor === null) break
    assert.ok(pages.length <= 400, `no end after ${pages.length} pages`)
    target = `/users?${limit === null ? '' : `limit=${limit}&`}cursor=${page.nextCursor}`
  }
  return { pages, links, ids: pages.flatMap((page) => page.items.map((user) => user.id)) }
}

/** Asserts that the walk returned exactly `expected` (ids), each once, in the order of `order`. */
function assertExactlyOnce(result: Walk, expected: readonly string[], order: 'asc' | 'desc'): void {
  assert.equal(
    new Set(result.ids).size,
    result.ids.length,
    `a user came twice: ${result.ids.join(',')}`,
  )
  const sorted = [...expected].sort()
  assert.deepEqual(result.ids, order === 'asc' ? sorted : sorted.reverse())
}

/**
 * 300 users in creation order: 3 whose name holds RARE, 294 others, then 2 more by name (one in
 * capitals) and 1 by email. The matches sit at both ends, so the pages between find nothing.
 */
async function seed(s: TestService): Promise<{ users: User[]; matches: User[] }> {
  const users: User[] = []
  for (let i = 0; i < 3; i += 1) users.push(await s.createUser({ name: `Early ${RARE} ${i}` }))
  for (let start = 0; start < 294; start += 21) {
    const batch = Array.from({ length: Math.min(21, 294 - start) }, (_, i) =>
      s.createUser({ name: `Plain ${start + i}` }),
    )
    users.push(...(await Promise.all(batch)).sort((a, b) => (a.id < b.id ? -1 : 1)))
  }
  users.push(await s.createUser({ name: `Late ${RARE}` }))
  users.push(await s.createUser({ name: `LATE ${RARE.toUpperCase()}` }))
  users.push(await s.createUser({ name: 'By Email', email: `${RARE}.${uniqueEmail()}` }))
  assert.equal(users.length, 300)
  const matches = users.filter((user) => `${user.name} ${user.email}`.toLowerCase().includes(RARE))
  assert.equal(matches.length, 6)
  return { users, matches }
}

describe('GET /users?q= under LIST_SCAN_BUDGET', () => {
  it('answers short and empty pages that say "keep going", and the walk returns every match exactly once', async (t) => {
    const s = await startService(t, { listScanBudget: BUDGET })
    const { users, matches } = await seed(s)
    const result = await walk(s, `q=${RARE}&limit=100`)
    assertExactlyOnce(
      result,
      matches.map((user) => user.id),
      'asc',
    )
    // Each page may look at no more than BUDGET users, so 300 users take at least 300 / BUDGET pages.
    assert.ok(
      result.pages.length >= users.length / BUDGET,
      `${result.pages.length} pages for ${users.length} users`,
    )
    const empty = result.pages.findIndex(
      (page) => page.items.length === 0 && page.nextCursor !== null,
    )
    assert.ok(empty !== -1, 'an empty page with a non-null nextCursor')
    assert.match(
      result.links[empty] ?? '',
      /; rel="next"$/,
      'an empty page still links to the next one',
    )
    for (const page of result.pages.slice(0, -1))
      assert.ok(page.items.length < 100, 'pages cut short by the budget')
    assert.equal(result.pages.at(-1)?.nextCursor, null)
  })

  it('returns every match exactly once with a small limit, newest first, and case-insensitively', async (t) => {
    const s = await startService(t, { listScanBudget: BUDGET })
    const { matches } = await seed(s)
    const ids = matches.map((user) => user.id)
    assertExactlyOnce(await walk(s, `q=${RARE}&limit=2`), ids, 'asc')
    assertExactlyOnce(await walk(s, `q=${RARE}&limit=1&sort=-createdAt`), ids, 'desc')
    assertExactlyOnce(await walk(s, `q=${RARE.toUpperCase()}&limit=5`), ids, 'asc')
  })

  it('walks q together with status to every match exactly once', async (t) => {
    const s = await startService(t, { listScanBudget: BUDGET })
    const { matches } = await seed(s)
    const activated = matches.filter((_, i) => i % 2 === 0)
    for (const user of activated)
      assert.equal((await s.call('POST', `/users/${user.id}:activate`)).status, 200)
    assertExactlyOnce(
      await walk(s, `q=${RARE}&status=active&limit=100`),
      activated.map((user) => user.id),
      'asc',
    )
    const pending = matches.filter((_, i) => i % 2 === 1)
    assertExactlyOnce(
      await walk(s, `q=${RARE}&status=pending&limit=1&sort=-createdAt`),
      pending.map((user) => user.id),
      'desc',
    )
  })
})

describe('GET /users?status= paging', () => {
  it('returns every user of the selected statuses exactly once, in full pages', async (t) => {
    const s = await startService(t, { listScanBudget: BUDGET })
    const { users } = await seed(s)
    const active: User[] = []
    const suspended: User[] = []
    for (const [i, user] of users.entries()) {
      if (i % 5 !== 0) continue
      assert.equal((await s.call('POST', `/users/${user.id}:activate`)).status, 200)
      if (i % 10 === 0) {
        assert.equal((await s.call('POST', `/users/${user.id}:suspend`)).status, 200)
        suspended.push(user)
      } else {
        active.push(user)
      }
    }
    const pending = users.filter((user) => !active.includes(user) && !suspended.includes(user))
    const ids = (list: readonly User[]): string[] => list.map((user) => user.id)

    const activeWalk = await walk(s, 'status=active&limit=7')
    assertExactlyOnce(activeWalk, ids(active), 'asc')
    // No scan budget for status: every page but the last is full.
    for (const page of activeWalk.pages.slice(0, -1)) assert.equal(page.items.length, 7)
    assertExactlyOnce(
      await walk(s, 'status=suspended&limit=4&sort=-createdAt'),
      ids(suspended),
      'desc',
    )
    assertExactlyOnce(
      await walk(s, 'status=pending,suspended&limit=100'),
      ids([...pending, ...suspended]),
      'asc',
    )
    assertExactlyOnce(await walk(s, 'status=active,pending,suspended&limit=100'), ids(users), 'asc')
  })
})
