import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { toRecord, type User, type UserRecord } from '../../src/domain/user.js'
import type { ListPage, ListQuery } from '../../src/store/store.js'
import { type ListWork, UserIndex } from '../../src/store/user-index.js'
import { changeUser, makeUser } from '../helpers/store-users.js'

/** An index holding `count` users, put in the given order; returns them oldest first. */
function indexOf(
  count: number,
  order: 'forward' | 'shuffled' = 'forward',
): { index: UserIndex; users: User[] } {
  const users = Array.from({ length: count }, (_, i) => makeUser({ name: `Person ${i}` }))
  const index = new UserIndex()
  const puts = order === 'forward' ? users : shuffle(users)
  for (const user of puts) index.put(toRecord(user))
  return { index, users }
}

/** A fixed permutation that puts many ids in the middle of the sorted list. */
function shuffle<T>(items: readonly T[]): T[] {
  const odd = items.filter((_, i) => i % 2 === 1).reverse()
  const even = items.filter((_, i) => i % 2 === 0)
  return [...odd, ...even]
}

const idsOf = (items: readonly UserRecord[]): string[] => items.map((record) => record.user.id)

function page(index: UserIndex, query: Partial<ListQuery>): { ids: string[]; hasMore: boolean } {
  const result = index.list({ filter: {}, order: 'asc', limit: 100, ...query })
  return { ids: idsOf(result.items), hasMore: result.hasMore }
}

/** One page and how many records it examined. */
function counted(index: UserIndex, query: Partial<ListQuery>): ListPage & ListWork {
  const work: ListWork = { examined: 0 }
  const result = index.list({ filter: {}, order: 'asc', limit: 100, ...query }, work)
  return { ...result, examined: work.examined }
}

describe('UserIndex: put, get and remove', () => {
  it('finds a record by id and its id by email key', () => {
    const index = new UserIndex()
    const record = toRecord(makeUser({ email: 'Ada@Example.com' }))
    index.put(record)
    assert.equal(index.size, 1)
    assert.equal(index.get(record.user.id), record)
    assert.equal(index.idOfEmail('ada@example.com'), record.user.id)
    assert.equal(
      index.idOfEmail('Ada@Example.com'),
      undefined,
      'lookups take the key, not the email',
    )
    assert.equal(index.get(makeUser().id), undefined)
  })

  it('replaces a record, moving its email key and keeping one entry in the order', () => {
    const index = new UserIndex()
    const user = makeUser({ email: 'old@example.com' })
    index.put(toRecord(user))
    const next = toRecord(changeUser(user, { email: 'new@example.com' }))
    index.put(next)
    assert.equal(index.size, 1)
    assert.equal(index.get(user.id), next)
    assert.equal(index.idOfEmail('old@example.com'), undefined)
    assert.equal(index.idOfEmail('new@example.com'), user.id)
    assert.deepEqual(page(index, {}).ids, [user.id])
  })

  it('removes a record from every view; removing an unknown id changes nothing', () => {
    const { index, users } = indexOf(3)
    const [a, b, c] = users.map((user) => user.id)
    index.remove(b ?? '')
    assert.equal(index.size, 2)
    assert.equal(index.get(b ?? ''), undefined)
    assert.equal(index.idOfEmail(users[1]?.email.toLowerCase() ?? ''), undefined)
    assert.deepEqual(page(index, {}).ids, [a, c])
    index.remove(b ?? '')
    index.remove(makeUser().id)
    assert.equal(index.size, 2)
    assert.deepEqual(page(index, {}).ids, [a, c])
  })

  it('keeps an email key that another id holds when removing', () => {
    const index = new UserIndex()
    const first = makeUser({ email: 'shared@example.com' })
    const second = makeUser({ email: 'shared@example.com' })
    index.put(toRecord(first))
    index.put(toRecord(second))
    index.remove(first.id)
    assert.equal(index.idOfEmail('shared@example.com'), second.id)
  })

  it('keeps ids sorted whatever order they are put in', () => {
    const { index, users } = indexOf(25, 'shuffled')
    assert.deepEqual(
      page(index, {}).ids,
      users.map((user) => user.id),
    )
    assert.deepEqual(page(index, { order: 'desc' }).ids, users.map((user) => user.id).reverse())
  })
})

describe('UserIndex: list', () => {
  it('pages forward and backward with after, limit and an exact hasMore', () => {
    const { index, users } = indexOf(10)
    const ids = users.map((user) => user.id)
    assert.deepEqual(page(index, { limit: 3 }), { ids: ids.slice(0, 3), hasMore: true })
    assert.deepEqual(page(index, { limit: 3, after: ids[2] ?? '' }), {
      ids: ids.slice(3, 6),
      hasMore: true,
    })
    assert.deepEqual(page(index, { limit: 4, after: ids[5] ?? '' }), {
      ids: ids.slice(6),
      hasMore: false,
    })
    assert.deepEqual(page(index, { limit: 10 }), { ids, hasMore: false })
    assert.deepEqual(page(index, { limit: 9 }), { ids: ids.slice(0, 9), hasMore: true })
    assert.deepEqual(page(index, { order: 'desc', limit: 3 }), {
      ids: ids.slice(7).reverse(),
      hasMore: true,
    })
    assert.deepEqual(page(index, { order: 'desc', limit: 3, after: ids[3] ?? '' }), {
      ids: ids.slice(0, 3).reverse(),
      hasMore: false,
    })
    assert.deepEqual(page(index, { after: ids[9] ?? '' }), { ids: [], hasMore: false })
    assert.deepEqual(page(index, { order: 'desc', after: ids[0] ?? '' }), {
      ids: [],
      hasMore: false,
    })
  })

  it('starts after an id it does not hold, in both orders', () => {
    const { index, users } = indexOf(6)
    const ids = users.map((user) => user.id)
    index.remove(ids[2] ?? '')
    assert.deepEqual(page(index, { after: ids[2] ?? '', limit: 2 }), {
      ids: ids.slice(3, 5),
      hasMore: true,
    })
    assert.deepEqual(page(index, { after: ids[2] ?? '', order: 'desc' }), {
      ids: ids.slice(0, 2).reverse(),
      hasMore: false,
    })
    // Ids before every stored one and after every stored one.
    assert.deepEqual(
      page(index, { after: '0' }).ids,
      ids.filter((_, i) => i !== 2),
    )
    assert.deepEqual(
      page(index, { after: 'g', order: 'desc' }).ids,
      ids.filter((_, i) => i !== 2).reverse(),
    )
    assert.deepEqual(page(index, { after: '0', order: 'desc' }), { ids: [], hasMore: false })
    assert.deepEqual(page(index, { after: 'g' }), { ids: [], hasMore: false })
  })

  it('lists nothing from an empty index', () => {
    const index = new UserIndex()
    assert.deepEqual(page(index, {}), { ids: [], hasMore: false })
    assert.deepEqual(page(index, { order: 'desc', after: makeUser().id }), {
      ids: [],
      hasMore: false,
    })
    assert.deepEqual(page(index, { filter: { email: 'a@example.com' } }), {
      ids: [],
      hasMore: false,
    })
  })

  it('skips users the filter refuses and says hasMore only for a later match', () => {
    const users = Array.from({ length: 8 }, (_, i) =>
      makeUser({ status: i % 3 === 0 ? 'active' : 'pending' }),
    )
    const index = new UserIndex()
    for (const user of users) index.put(toRecord(user))
    const active = users.filter((user) => user.status === 'active').map((user) => user.id)
    assert.equal(active.length, 3)
    const filter = { statuses: ['active'] } as const
    assert.deepEqual(page(index, { filter, limit: 2 }), { ids: active.slice(0, 2), hasMore: true })
    // The last active user is followed by pending ones only.
    assert.deepEqual(page(index, { filter, limit: 2, after: active[1] ?? '' }), {
      ids: active.slice(2),
      hasMore: false,
    })
    assert.deepEqual(page(index, { filter, limit: 3 }), { ids: active, hasMore: false })
    assert.deepEqual(page(index, { filter: { statuses: [] } }), { ids: [], hasMore: false })
  })

  it('matches q against the lower-cased name and email, and an email filter exactly', () => {
    const index = new UserIndex()
    const ada = makeUser({ name: 'ADA Lovelace', email: 'Countess@Example.com' })
    const bob = makeUser({ name: 'Bob', email: 'bob.lovelace@example.com' })
    index.put(toRecord(ada))
    index.put(toRecord(bob))
    assert.deepEqual(page(index, { filter: { q: 'lovelace' } }).ids, [ada.id, bob.id])
    assert.deepEqual(page(index, { filter: { q: 'COUNTESS@' } }).ids, [ada.id])
    assert.deepEqual(page(index, { filter: { q: 'ada l' } }).ids, [ada.id])
    assert.deepEqual(page(index, { filter: { q: 'carol' } }).ids, [])
    assert.deepEqual(page(index, { filter: { email: 'COUNTESS@example.COM' } }).ids, [ada.id])
    assert.deepEqual(page(index, { filter: { email: 'countess' } }).ids, [])
    assert.deepEqual(page(index, { filter: { email: 'countess@example.com', q: 'bob' } }).ids, [])
  })

  it('applies statuses, after and order to an email lookup', () => {
    const { index, users } = indexOf(3)
    const [first, middle, last] = users
    const email = middle?.email.toUpperCase() ?? ''
    assert.deepEqual(page(index, { filter: { email } }), { ids: [middle?.id], hasMore: false })
    assert.deepEqual(page(index, { filter: { email, statuses: ['pending'] } }).ids, [middle?.id])
    assert.deepEqual(page(index, { filter: { email, statuses: ['active'] } }).ids, [])
    assert.deepEqual(page(index, { filter: { email }, after: first?.id ?? '' }).ids, [middle?.id])
    assert.deepEqual(page(index, { filter: { email }, after: middle?.id ?? '' }).ids, [])
    assert.deepEqual(page(index, { filter: { email }, order: 'desc', after: last?.id ?? '' }).ids, [
      middle?.id,
    ])
    assert.deepEqual(
      page(index, { filter: { email }, order: 'desc', after: middle?.id ?? '' }).ids,
      [],
    )
  })

  it('examines at most limit + 1 records for a page without a filter, whatever the number of users', () => {
    for (const count of [100, 20_000]) {
      const { index, users } = indexOf(count)
      const middle = users[count >> 1]?.id ?? ''
      for (const query of [
        {},
        { order: 'desc' },
        { after: middle },
        { order: 'desc', after: middle },
      ] as const) {
        const result = counted(index, { ...query, limit: 20 })
        assert.equal(result.items.length, 20)
        assert.equal(result.hasMore, true)
        assert.ok(
          result.examined <= 21,
          `${result.examined} records examined for 20 of ${count} users`,
        )
      }
    }
  })
})
