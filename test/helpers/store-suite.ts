import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import { ServiceError } from '../../src/domain/errors.js'
import type { User, UserRecord, UserStatus } from '../../src/domain/user.js'
import type { ListFilter, Store } from '../../src/store/store.js'
import { MAX_USER_VERSION } from '../../src/users/user-fields.js'
import { describeMoreStoreContract } from './store-contract-more.js'
import { describeKeyContract } from './store-keys-suite.js'
import { changeUser, makeUser, toContractJson } from './store-users.js'

/** Makes a new, empty, unopened store; it may register its own clean-up on `t`. */
export type StoreFactory = (t: TestContext) => Promise<Store>

/** Makes a store with the factory, opens it, and closes it when the test ends. */
export async function openStore(t: TestContext, factory: StoreFactory): Promise<Store> {
  const store = await factory(t)
  await store.open()
  t.after(() => store.close())
  return store
}

/** Every user the filter selects, following `after` from page to page. */
export async function listAll(
  store: Store,
  filter: ListFilter = {},
  order: 'asc' | 'desc' = 'asc',
  limit = 100,
): Promise<UserRecord[]> {
  const items: UserRecord[] = []
  let after: string | undefined
  for (;;) {
    const page = await store.list({
      filter,
      order,
      limit,
      ...(after === undefined ? {} : { after }),
    })
    items.push(...page.items)
    if (!page.hasMore) return items
    after = page.items.at(-1)?.user.id
    if (after === undefined) throw new Error('a page with hasMore but no items')
  }
}

/** The JSON of every stored user in id order: compare before and after to see that nothing changed. */
export async function snapshotStore(store: Store): Promise<string[]> {
  return (await listAll(store)).map((record) => record.json)
}

/** The metadata counter `n` of a user, plus one. */
function increment(current: UserRecord): User {
  const n = Number(current.user.metadata['n'] ?? '0') + 1
  return changeUser(current.user, { metadata: { ...current.user.metadata, n: String(n) } })
}

const PEOPLE: readonly { name: string; email: string; status: UserStatus }[] = [
  { name: 'Ada Lovelace', email: 'ada@math.example', status: 'active' },
  { name: 'Grace Hopper', email: 'grace@navy.example', status: 'pending' },
  { name: 'Alan Turing', email: 'alan@math.example', status: 'suspended' },
  { name: 'Edsger Dijkstra', email: 'ewd@tue.example', status: 'active' },
  { name: 'Barbara Liskov', email: 'liskov@mit.example', status: 'pending' },
  { name: 'Donald Knuth', email: 'knuth@stanford.example', status: 'active' },
  { name: 'Frances Allen', email: 'fran@ibm.example', status: 'suspended' },
  { name: 'John McCarthy', email: 'jmc@stanford.example', status: 'active' },
  { name: 'Margaret Hamilton', email: 'MHamilton@Nasa.example', status: 'pending' },
]

/** Nine known users, created oldest first (so ascending ids follow this order). */
async function seedPeople(store: Store): Promise<User[]> {
  const users: User[] = []
  for (const person of PEOPLE) users.push((await store.create(makeUser(person))).user)
  return users
}

const namesOf = (items: readonly UserRecord[]): string[] => items.map((record) => record.user.name)

/** Registers the behaviour every Store must have, run against stores made by `factory`. */
export function describeStoreContract(label: string, factory: StoreFactory): void {
  describeMoreStoreContract(label, factory, openStore)
  describeKeyContract(label, factory, openStore)
  describe(`${label}: create and get`, () => {
    it('returns a record with the contract JSON, the ETag "v1" and the email key', async (t) => {
      const store = await openStore(t, factory)
      const user = makeUser({ email: 'Mixed.Case@Example.com', metadata: { team: 'analytics' } })
      // Built in another field order: the JSON must still follow the contract's order.
      const scrambled: User = {
        version: user.version,
        metadata: user.metadata,
        updatedAt: user.updatedAt,
        status: user.status,
        createdAt: user.createdAt,
        name: user.name,
        email: user.email,
        id: user.id,
      }
      const record = await store.create(scrambled)
      assert.equal(record.json, toContractJson(user))
      assert.deepEqual(Object.keys(JSON.parse(record.json) as object), [
        'id',
        'email',
        'name',
        'status',
        'metadata',
        'createdAt',
        'updatedAt',
        'version',
      ])
      assert.equal(record.etag, '"v1"')
      assert.equal(record.emailKey, 'mixed.case@example.com')
      assert.deepEqual(record.user, user)
    })

    it('gets the stored record, and undefined for an unknown id', async (t) => {
      const store = await openStore(t, factory)
      const record = await store.create(makeUser())
      assert.deepEqual(await store.get(record.user.id), record)
      assert.equal(await store.get(makeUser().id), undefined)
      assert.equal(await store.get(''), undefined)
    })

    it('refuses a second user with an id already taken, changing nothing', async (t) => {
      const store = await openStore(t, factory)
      const first = await store.create(makeUser())
      const before = await snapshotStore(store)
      await assert.rejects(store.create(makeUser({ id: first.user.id })), {
        name: 'ServiceError',
        code: 'duplicate_id',
        message: /already exists/,
      })
      assert.deepEqual(await snapshotStore(store), before)
    })

    it('refuses ids that are not canonical UUIDs before anything is written', async (t) => {
      const store = await openStore(t, factory)
      for (const id of ['../victim', 'not-a-uuid', makeUser().id.toUpperCase()]) {
        await assert.rejects(store.create(makeUser({ id })), {
          name: 'ServiceError',
          code: 'validation_failed',
          message: /canonical UUID/,
        })
      }
      assert.deepEqual(await snapshotStore(store), [])
    })

    it('refuses a change that alters the id, changing nothing', async (t) => {
      const store = await openStore(t, factory)
      const first = await store.create(makeUser())
      const before = await snapshotStore(store)
      await assert.rejects(
        store.update(first.user.id, (current) => ({ ...current.user, id: makeUser().id })),
        (error: unknown) =>
          error instanceof ServiceError &&
          error.code === 'internal' &&
          /may not alter the id/.test(String(error.cause)),
      )
      assert.deepEqual(await snapshotStore(store), before)
    })
  })

  describe(`${label}: email uniqueness`, () => {
    it('refuses a create whose email differs only in case with duplicate_email, changing nothing', async (t) => {
      const store = await openStore(t, factory)
      await store.create(makeUser({ email: 'Ada@Example.com' }))
      const before = await snapshotStore(store)
      const other = makeUser({ email: 'aDA@eXAMPLE.COM' })
      await assert.rejects(store.create(other), { name: 'ServiceError', code: 'duplicate_email' })
      assert.equal(await store.get(other.id), undefined)
      assert.deepEqual(await snapshotStore(store), before)
    })

    it("refuses an update to another user's email with duplicate_email, changing nothing", async (t) => {
      const store = await openStore(t, factory)
      await store.create(makeUser({ email: 'ada@example.com' }))
      const grace = await store.create(makeUser({ email: 'grace@example.com' }))
      const before = await snapshotStore(store)
      await assert.rejects(
        store.update(grace.user.id, (current) =>
          changeUser(current.user, { email: 'ADA@example.com' }),
        ),
        { name: 'ServiceError', code: 'duplicate_email' },
      )
      assert.deepEqual(await snapshotStore(store), before)
      const found = await store.list({
        filter: { email: 'ada@example.com' },
        order: 'asc',
        limit: 10,
      })
      assert.equal(found.items.length, 1)
      assert.notEqual(found.items[0]?.user.id, grace.user.id)
    })

    it('lets a user change the case of its own email', async (t) => {
      const store = await openStore(t, factory)
      const ada = await store.create(makeUser({ email: 'ada@example.com' }))
      const next = await store.update(ada.user.id, (current) =>
        changeUser(current.user, { email: 'ADA@example.com' }),
      )
      assert.equal(next.user.email, 'ADA@example.com')
      assert.equal(next.user.version, 2)
      assert.deepEqual(await store.get(ada.user.id), next)
    })

    it('frees the old email when a user changes it, and takes the new one', async (t) => {
      const store = await openStore(t, factory)
      const ada = await store.create(makeUser({ email: 'old@example.com' }))
      await store.update(ada.user.id, (current) =>
        changeUser(current.user, { email: 'new@example.com' }),
      )
      const taker = await store.create(makeUser({ email: 'OLD@example.com' }))
      assert.equal(taker.user.email, 'OLD@example.com')
      await assert.rejects(store.create(makeUser({ email: 'New@Example.com' })), {
        code: 'duplicate_email',
      })
      const byOld = await store.list({
        filter: { email: 'old@example.com' },
        order: 'asc',
        limit: 10,
      })
      assert.deepEqual(
        byOld.items.map((record) => record.user.id),
        [taker.user.id],
      )
    })

    it('frees the email of a deleted user', async (t) => {
      const store = await openStore(t, factory)
      const ada = await store.create(makeUser({ email: 'ada@example.com' }))
      await store.delete(ada.user.id)
      const again = await store.create(makeUser({ email: 'Ada@example.com' }))
      assert.deepEqual(await store.get(again.user.id), again)
    })

    it('lets exactly one of 20 concurrent creates with one email succeed', async (t) => {
      const store = await openStore(t, factory)
      const users = Array.from({ length: 20 }, (_, i) =>
        makeUser({ email: i % 2 === 0 ? 'race@example.com' : 'RACE@example.com' }),
      )
      const results = await Promise.allSettled(users.map((user) => store.create(user)))
      const fulfilled = results.filter((result) => result.status === 'fulfilled')
      assert.equal(fulfilled.length, 1)
      for (const result of results) {
        if (result.status === 'rejected')
          assert.equal((result.reason as { code?: unknown }).code, 'duplicate_email')
      }
      const stored = await listAll(store)
      assert.equal(stored.length, 1)
      assert.equal(stored[0]?.emailKey, 'race@example.com')
    })

    it('lets exactly one of concurrent creates and updates claiming one email succeed', async (t) => {
      const store = await openStore(t, factory)
      const existing: UserRecord[] = []
      for (let i = 0; i < 10; i += 1) existing.push(await store.create(makeUser()))
      const results = await Promise.allSettled([
        ...existing.map((record) =>
          store.update(record.user.id, (current) =>
            changeUser(current.user, { email: 'claim@example.com' }),
          ),
        ),
        ...Array.from({ length: 10 }, () => store.create(makeUser({ email: 'Claim@Example.com' }))),
      ])
      assert.equal(results.filter((result) => result.status === 'fulfilled').length, 1)
      const holders = await store.list({
        filter: { email: 'claim@example.com' },
        order: 'asc',
        limit: 100,
      })
      assert.equal(holders.items.length, 1)
      const all = await listAll(store)
      assert.equal(all.filter((record) => record.emailKey === 'claim@example.com').length, 1)
    })
  })

  describe(`${label}: update`, () => {
    it('applies the change to the current record and returns the new record', async (t) => {
      const store = await openStore(t, factory)
      const created = await store.create(makeUser({ name: 'Ada' }))
      let seen: UserRecord | undefined
      const next = await store.update(created.user.id, (current) => {
        seen = current
        return changeUser(current.user, { name: 'Ada Lovelace' })
      })
      assert.deepEqual(seen, created)
      assert.equal(next.user.name, 'Ada Lovelace')
      assert.equal(next.user.version, 2)
      assert.equal(next.etag, '"v2"')
      assert.equal(next.json, toContractJson(next.user))
      assert.deepEqual(await store.get(created.user.id), next)
    })

    it('rejects an unknown id with not_found without calling change', async (t) => {
      const store = await openStore(t, factory)
      await store.create(makeUser())
      const before = await snapshotStore(store)
      let called = false
      const ghost = makeUser()
      await assert.rejects(
        store.update(ghost.id, () => {
          called = true
          return ghost
        }),
        { name: 'ServiceError', code: 'not_found' },
      )
      assert.equal(called, false)
      assert.deepEqual(await snapshotStore(store), before)
    })

    it('writes nothing and returns the current record when change returns undefined', async (t) => {
      const store = await openStore(t, factory)
      const created = await store.create(makeUser())
      const before = await snapshotStore(store)
      const result = await store.update(created.user.id, () => undefined)
      assert.deepEqual(result, created)
      assert.deepEqual(await store.get(created.user.id), created)
      assert.deepEqual(await snapshotStore(store), before)
    })

    it('writes nothing when change throws, and rejects with its error', async (t) => {
      const store = await openStore(t, factory)
      const created = await store.create(makeUser({ email: 'ada@example.com' }))
      const before = await snapshotStore(store)
      const refusal = new Error('refused by the precondition')
      await assert.rejects(
        store.update(created.user.id, () => {
          throw refusal
        }),
        (error) => error === refusal,
      )
      assert.deepEqual(await snapshotStore(store), before)
      // The store still works for this user afterwards.
      const next = await store.update(created.user.id, increment)
      assert.equal(next.user.version, 2)
    })

    it('runs an update queued behind a failing one against the state it left', async (t) => {
      const store = await openStore(t, factory)
      const created = await store.create(makeUser())
      const results = await Promise.allSettled([
        store.update(created.user.id, () => {
          throw new Error('refused')
        }),
        store.update(created.user.id, increment),
      ])
      assert.equal(results[0]?.status, 'rejected')
      assert.equal(results[1]?.status, 'fulfilled')
      const stored = await store.get(created.user.id)
      assert.ok(stored)
      assert.equal(stored.user.version, 2)
      assert.equal(stored.user.metadata['n'], '1')
    })

    it('serialises concurrent updates to one user: 20 increments all land', async (t) => {
      const store = await openStore(t, factory)
      const created = await store.create(makeUser())
      const versionsSeen: number[] = []
      const results = await Promise.all(
        Array.from({ length: 20 }, () =>
          store.update(created.user.id, (current) => {
            versionsSeen.push(current.user.version)
            return increment(current)
          }),
        ),
      )
      assert.deepEqual(
        versionsSeen,
        Array.from({ length: 20 }, (_, i) => i + 1),
      )
      const versions = results.map((record) => record.user.version).sort((a, b) => a - b)
      assert.deepEqual(
        versions,
        Array.from({ length: 20 }, (_, i) => i + 2),
      )
      const stored = await store.get(created.user.id)
      assert.ok(stored)
      assert.equal(stored.user.metadata['n'], '20')
      assert.equal(stored.user.version, 21)
      assert.equal(stored.etag, '"v21"')
    })
  })

  describe(`${label}: delete`, () => {
    it('removes the user after check passes, giving check the current record', async (t) => {
      const store = await openStore(t, factory)
      const keep = await store.create(makeUser())
      const gone = await store.create(makeUser())
      let checked: UserRecord | undefined
      await store.delete(gone.user.id, (current) => {
        checked = current
      })
      assert.deepEqual(checked, gone)
      assert.equal(await store.get(gone.user.id), undefined)
      assert.deepEqual(
        (await listAll(store)).map((record) => record.user.id),
        [keep.user.id],
      )
    })

    it('rejects an unknown id with not_found when given a check, without calling it', async (t) => {
      const store = await openStore(t, factory)
      await store.create(makeUser())
      const before = await snapshotStore(store)
      let called = false
      await assert.rejects(
        store.delete(makeUser().id, () => {
          called = true
        }),
        { name: 'ServiceError', code: 'not_found' },
      )
      assert.equal(called, false)
      assert.deepEqual(await snapshotStore(store), before)
    })

    it('rejects an unknown id with not_found when given no check', async (t) => {
      const store = await openStore(t, factory)
      await store.create(makeUser())
      const before = await snapshotStore(store)
      await assert.rejects(store.delete(makeUser().id), { name: 'ServiceError', code: 'not_found' })
      assert.deepEqual(await snapshotStore(store), before)
    })

    it('keeps the user when check throws, rejecting with its error', async (t) => {
      const store = await openStore(t, factory)
      const created = await store.create(makeUser())
      const before = await snapshotStore(store)
      const refusal = new Error('precondition failed')
      await assert.rejects(
        store.delete(created.user.id, () => {
          throw refusal
        }),
        (error) => error === refusal,
      )
      assert.deepEqual(await store.get(created.user.id), created)
      assert.deepEqual(await snapshotStore(store), before)
    })

    it('serialises a delete behind an update in flight; a later update finds nothing', async (t) => {
      const store = await openStore(t, factory)
      const created = await store.create(makeUser())
      const [updated] = await Promise.all([
        store.update(created.user.id, increment),
        store.delete(created.user.id),
      ])
      assert.equal(updated.user.version, 2)
      assert.equal(await store.get(created.user.id), undefined)
      await assert.rejects(store.update(created.user.id, increment), { code: 'not_found' })
      assert.deepEqual(await snapshotStore(store), [])
    })
  })

  describe(`${label}: list`, () => {
    it('lists in ascending and descending id order', async (t) => {
      const store = await openStore(t, factory)
      const people = await seedPeople(store)
      const asc = await store.list({ filter: {}, order: 'asc', limit: 100 })
      assert.deepEqual(
        namesOf(asc.items),
        people.map((user) => user.name),
      )
      assert.equal(asc.hasMore, false)
      const desc = await store.list({ filter: {}, order: 'desc', limit: 100 })
      assert.deepEqual(namesOf(desc.items), people.map((user) => user.name).reverse())
      assert.equal(desc.hasMore, false)
    })

    it('pages with after and limit, with hasMore exact', async (t) => {
      const store = await openStore(t, factory)
      const people = await seedPeople(store)
      const ids = people.map((user) => user.id)
      const first = await store.list({ filter: {}, order: 'asc', limit: 4 })
      assert.deepEqual(
        first.items.map((record) => record.user.id),
        ids.slice(0, 4),
      )
      assert.equal(first.hasMore, true)
      const second = await store.list({ filter: {}, order: 'asc', limit: 4, after: ids[3] ?? '' })
      assert.deepEqual(
        second.items.map((record) => record.user.id),
        ids.slice(4, 8),
      )
      assert.equal(second.hasMore, true)
      const third = await store.list({ filter: {}, order: 'asc', limit: 4, after: ids[7] ?? '' })
      assert.deepEqual(
        third.items.map((record) => record.user.id),
        ids.slice(8),
      )
      assert.equal(third.hasMore, false)
      const back = await store.list({ filter: {}, order: 'desc', limit: 4, after: ids[5] ?? '' })
      assert.deepEqual(
        back.items.map((record) => record.user.id),
        ids.slice(1, 5).reverse(),
      )
      assert.equal(back.hasMore, true)
      const last = await store.list({ filter: {}, order: 'desc', limit: 4, after: ids[1] ?? '' })
      assert.deepEqual(
        last.items.map((record) => record.user.id),
        ids.slice(0, 1),
      )
      assert.equal(last.hasMore, false)
    })

    it('says hasMore false when a page ends exactly on the last user, in both orders', async (t) => {
      const store = await openStore(t, factory)
      const people = await seedPeople(store)
      const ids = people.map((user) => user.id)
      assert.equal((await store.list({ filter: {}, order: 'asc', limit: 9 })).hasMore, false)
      assert.equal((await store.list({ filter: {}, order: 'asc', limit: 8 })).hasMore, true)
      const tail = await store.list({ filter: {}, order: 'asc', limit: 3, after: ids[5] ?? '' })
      assert.equal(tail.items.length, 3)
      assert.equal(tail.hasMore, false)
      const head = await store.list({ filter: {}, order: 'desc', limit: 3, after: ids[3] ?? '' })
      assert.deepEqual(
        head.items.map((record) => record.user.id),
        ids.slice(0, 3).reverse(),
      )
      assert.equal(head.hasMore, false)
      const beyond = await store.list({ filter: {}, order: 'asc', limit: 3, after: ids[8] ?? '' })
      assert.deepEqual(beyond, { items: [], hasMore: false })
    })

    it('continues after an id that is no longer stored', async (t) => {
      const store = await openStore(t, factory)
      const people = await seedPeople(store)
      const gone = people[4]?.id ?? ''
      await store.delete(gone)
      const asc = await store.list({ filter: {}, order: 'asc', limit: 2, after: gone })
      assert.deepEqual(namesOf(asc.items), ['Donald Knuth', 'Frances Allen'])
      const desc = await store.list({ filter: {}, order: 'desc', limit: 2, after: gone })
      assert.deepEqual(namesOf(desc.items), ['Edsger Dijkstra', 'Alan Turing'])
    })

    it('filters by one status or several', async (t) => {
      const store = await openStore(t, factory)
      await seedPeople(store)
      const active = await store.list({
        filter: { statuses: ['active'] },
        order: 'asc',
        limit: 100,
      })
      assert.deepEqual(namesOf(active.items), [
        'Ada Lovelace',
        'Edsger Dijkstra',
        'Donald Knuth',
        'John McCarthy',
      ])
      const others = await store.list({
        filter: { statuses: ['suspended', 'pending'] },
        order: 'asc',
        limit: 100,
      })
      assert.deepEqual(namesOf(others.items), [
        'Grace Hopper',
        'Alan Turing',
        'Barbara Liskov',
        'Frances Allen',
        'Margaret Hamilton',
      ])
    })

    it('filters by exact email, compared case-insensitively', async (t) => {
      const store = await openStore(t, factory)
      await seedPeople(store)
      const ada = await store.list({
        filter: { email: 'ADA@Math.Example' },
        order: 'asc',
        limit: 100,
      })
      assert.deepEqual(namesOf(ada.items), ['Ada Lovelace'])
      assert.equal(ada.hasMore, false)
      const margaret = await store.list({
        filter: { email: 'mhamilton@nasa.example' },
        order: 'desc',
        limit: 100,
      })
      assert.deepEqual(namesOf(margaret.items), ['Margaret Hamilton'])
      assert.equal(margaret.items[0]?.user.email, 'MHamilton@Nasa.example')
      const partial = await store.list({ filter: { email: 'ada@math' }, order: 'asc', limit: 100 })
      assert.deepEqual(partial, { items: [], hasMore: false })
    })

    it('filters by q, a case-insensitive substring of name or email (not the id)', async (t) => {
      const store = await openStore(t, factory)
      const people = await seedPeople(store)
      const an = await store.list({ filter: { q: 'AN' }, order: 'asc', limit: 100 })
      assert.deepEqual(namesOf(an.items), [
        'Alan Turing',
        'Donald Knuth',
        'Frances Allen',
        'John McCarthy',
      ])
      const math = await store.list({ filter: { q: 'math' }, order: 'asc', limit: 100 })
      assert.deepEqual(namesOf(math.items), ['Ada Lovelace', 'Alan Turing'])
      const nasa = await store.list({ filter: { q: 'nAsA' }, order: 'asc', limit: 100 })
      assert.deepEqual(namesOf(nasa.items), ['Margaret Hamilton'])
      const byId = await store.list({
        filter: { q: people[0]?.id.slice(0, 13) ?? '' },
        order: 'asc',
        limit: 100,
      })
      assert.deepEqual(byId.items, [])
    })

    it('finds q in any case of a Greek sigma: Σ, σ and the final ς are one letter', async (t) => {
      const store = await openStore(t, factory)
      // toLowerCase writes Σ as ς at the end of a word and as σ inside one: ΑΣ is not in ασα.
      const upper = await store.create(makeUser({ email: 'ΚΟΣΜΟΣ@example.gr', name: 'ΑΣΑ ΟΔΟΣ' }))
      const lower = await store.create(makeUser({ email: 'kosmos@example.gr', name: 'ασα οδοσ' }))
      const both = ['ΑΣΑ ΟΔΟΣ', 'ασα οδοσ']
      const cases: Array<[string, string[]]> = [
        ['ΑΣ', both],
        ['ασ', both],
        ['ας', both],
        ['ΟΔΟΣ', both],
        ['οδος', both],
        ['ΚΟΣ', ['ΑΣΑ ΟΔΟΣ']],
        ['κοσμοσ@', ['ΑΣΑ ΟΔΟΣ']],
        ['ΜΟΣ@', ['ΑΣΑ ΟΔΟΣ']],
      ]
      for (const [q, expected] of cases) {
        const page = await store.list({ filter: { q }, order: 'asc', limit: 100 })
        assert.deepEqual(namesOf(page.items), expected, q)
      }
      const byEmail = await store.list({
        filter: { email: upper.user.email, q: 'ΑΣ' },
        order: 'asc',
        limit: 100,
      })
      assert.deepEqual(namesOf(byEmail.items), ['ΑΣΑ ΟΔΟΣ'])
      assert.equal(lower.user.email, 'kosmos@example.gr')
    })

    it('combines filters with AND', async (t) => {
      const store = await openStore(t, factory)
      await seedPeople(store)
      const list = (filter: ListFilter): Promise<string[]> =>
        store.list({ filter, order: 'asc', limit: 100 }).then((page) => namesOf(page.items))
      assert.deepEqual(await list({ statuses: ['active'], q: 'stanford' }), [
        'Donald Knuth',
        'John McCarthy',
      ])
      assert.deepEqual(await list({ statuses: ['pending', 'suspended'], q: 'an' }), [
        'Alan Turing',
        'Frances Allen',
      ])
      assert.deepEqual(await list({ email: 'ada@math.example', statuses: ['pending'] }), [])
      assert.deepEqual(await list({ email: 'ada@math.example', statuses: ['active'], q: 'LOVE' }), [
        'Ada Lovelace',
      ])
      assert.deepEqual(await list({ email: 'ada@math.example', q: 'turing' }), [])
    })

    it('pages filtered lists with after and an exact hasMore', async (t) => {
      const store = await openStore(t, factory)
      const people = await seedPeople(store)
      const ids = people.map((user) => user.id)
      const active = { statuses: ['active'] } as const
      const first = await store.list({ filter: active, order: 'asc', limit: 2 })
      assert.deepEqual(namesOf(first.items), ['Ada Lovelace', 'Edsger Dijkstra'])
      assert.equal(first.hasMore, true)
      // John is the last active user although Margaret (pending) comes after him.
      const second = await store.list({
        filter: active,
        order: 'asc',
        limit: 2,
        after: ids[3] ?? '',
      })
      assert.deepEqual(namesOf(second.items), ['Donald Knuth', 'John McCarthy'])
      assert.equal(second.hasMore, false)
      const down = await store.list({ filter: active, order: 'desc', limit: 3 })
      assert.deepEqual(namesOf(down.items), ['John McCarthy', 'Donald Knuth', 'Edsger Dijkstra'])
      assert.equal(down.hasMore, true)
      const rest = await store.list({
        filter: active,
        order: 'desc',
        limit: 3,
        after: ids[3] ?? '',
      })
      assert.deepEqual(namesOf(rest.items), ['Ada Lovelace'])
      assert.equal(rest.hasMore, false)
    })

    it('applies after to an email filter in both orders', async (t) => {
      const store = await openStore(t, factory)
      const people = await seedPeople(store)
      const ids = people.map((user) => user.id)
      const ewd = { email: 'EWD@tue.example' }
      const page = (order: 'asc' | 'desc', after: string): Promise<string[]> =>
        store.list({ filter: ewd, order, limit: 10, after }).then((result) => namesOf(result.items))
      assert.deepEqual(await page('asc', ids[2] ?? ''), ['Edsger Dijkstra'])
      assert.deepEqual(await page('asc', ids[3] ?? ''), [])
      assert.deepEqual(await page('desc', ids[4] ?? ''), ['Edsger Dijkstra'])
      assert.deepEqual(await page('desc', ids[3] ?? ''), [])
    })

    for (const order of ['asc', 'desc'] as const) {
      it(`pages (${order}) through every user that existed throughout exactly once while others come and go`, async (t) => {
        const store = await openStore(t, factory)
        const stable = new Set<string>()
        const doomed: string[] = []
        for (let i = 0; i < 60; i += 1) {
          const record = await store.create(makeUser())
          if (i % 3 === 1) doomed.push(record.user.id)
          else stable.add(record.user.id)
        }
        const seen: string[] = []
        let after: string | undefined
        for (let pages = 0; pages < 100; pages += 1) {
          const churn: Promise<unknown>[] = [store.create(makeUser()), store.create(makeUser())]
          const early = doomed.shift()
          const late = doomed.pop()
          if (early !== undefined) churn.push(store.delete(early))
          if (late !== undefined) churn.push(store.delete(late))
          const [page] = await Promise.all([
            store.list({ filter: {}, order, limit: 5, ...(after === undefined ? {} : { after }) }),
            ...churn,
          ])
          seen.push(...page.items.map((record) => record.user.id))
          if (!page.hasMore) break
          after = page.items.at(-1)?.user.id
        }
        const counts = new Map<string, number>()
        for (const id of seen) counts.set(id, (counts.get(id) ?? 0) + 1)
        for (const id of stable)
          assert.equal(counts.get(id), 1, `user ${id} was seen ${counts.get(id) ?? 0} times`)
        for (const [id, count] of counts)
          assert.equal(count, 1, `user ${id} was seen ${count} times`)
        const sorted = [...seen].sort()
        assert.deepEqual(seen, order === 'asc' ? sorted : sorted.reverse())
      })
    }
  })

  describe(`${label}: metadata keys`, () => {
    it('stores __proto__ and constructor as ordinary keys without polluting Object.prototype', async (t) => {
      const store = await openStore(t, factory)
      const text = '{"__proto__":"polluted","constructor":"not a function","toString":"x"}'
      const metadata = JSON.parse(text) as Record<string, string>
      const created = await store.create(makeUser({ metadata }))
      const parsed = JSON.parse(created.json) as { metadata: Record<string, string> }
      assert.deepEqual(Object.keys(parsed.metadata), ['__proto__', 'constructor', 'toString'])
      assert.ok(created.json.includes(`"metadata":${text}`))
      const next = await store.update(created.user.id, increment)
      const stored = await store.get(created.user.id)
      assert.deepEqual(stored, next)
      assert.deepEqual(Object.keys(stored?.user.metadata ?? {}), [
        '__proto__',
        'constructor',
        'toString',
        'n',
      ])
      assert.equal(
        Object.getOwnPropertyDescriptor(stored?.user.metadata, '__proto__')?.value,
        'polluted',
      )
      assert.equal(
        Object.getOwnPropertyDescriptor(stored?.user.metadata, 'constructor')?.value,
        'not a function',
      )
      assert.equal(Object.getPrototypeOf({}), Object.prototype)
      assert.equal(Object.hasOwn(Object.prototype, 'polluted'), false)
      assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
      assert.equal(typeof {}.constructor, 'function')
      const page = await store.list({ filter: { q: 'polluted' }, order: 'asc', limit: 10 })
      assert.deepEqual(page.items, [])
    })
  })
  describe(`${label}: hostile input`, () => {
    /** Input is the client's fault: the store stays healthy whatever it was sent. */
    const assertHealthy = (store: Store): void => {
      assert.equal(store.health?.().state ?? 'ok', 'ok')
    }

    it('refuses a NUL in email or name with validation_failed naming the field, on create and update, changing nothing', async (t) => {
      const store = await openStore(t, factory)
      const ada = await store.create(makeUser({ email: 'ada@example.com' }))
      const before = await snapshotStore(store)
      const cases = [
        ['email', 'a\u0000b@example.com'],
        ['name', 'Ada\u0000Lovelace'],
      ] as const
      for (const [field, value] of cases) {
        const refused = {
          name: 'ServiceError',
          code: 'validation_failed',
          errors: [
            {
              pointer: `/${field}`,
              code: 'invalid_characters',
              message: `${field} must not contain a NUL character (U+0000).`,
            },
          ],
        }
        await assert.rejects(store.create(makeUser({ [field]: value })), refused)
        await assert.rejects(
          store.update(ada.user.id, (current) => changeUser(current.user, { [field]: value })),
          refused,
        )
      }
      assert.deepEqual(await snapshotStore(store), before)
      assertHealthy(store)
    })

    it('stores a NUL inside a metadata value and reads it back', async (t) => {
      const store = await openStore(t, factory)
      const created = await store.create(makeUser({ metadata: { note: 'a\u0000b' } }))
      assert.equal((await store.get(created.user.id))?.user.metadata['note'], 'a\u0000b')
      const next = await store.update(created.user.id, (current) =>
        changeUser(current.user, { metadata: { note: '\u0000' } }),
      )
      assert.deepEqual(await store.get(created.user.id), next)
      assert.equal(next.user.metadata['note'], '\u0000')
    })

    it('refuses a NUL in the q or email filter or in after with bad_request naming it, staying healthy', async (t) => {
      const store = await openStore(t, factory)
      await seedPeople(store)
      for (const filter of [
        { q: 'a\u0000b' },
        { email: 'ada\u0000@math.example' },
        { statuses: ['active'], q: '\u0000' },
      ] as ListFilter[]) {
        const name = filter.q === undefined ? 'email' : 'q'
        for (const order of ['asc', 'desc'] as const) {
          await assert.rejects(store.list({ filter, order, limit: 10 }), {
            name: 'ServiceError',
            code: 'bad_request',
            message: `The query parameter ${name} must not contain a NUL character (U+0000).`,
          })
        }
      }
      await assert.rejects(
        store.list({ filter: {}, order: 'asc', limit: 10, after: `${makeUser().id}\u0000` }),
        {
          name: 'ServiceError',
          code: 'bad_request',
          message: 'The query parameter cursor must not contain a NUL character (U+0000).',
        },
      )
      assertHealthy(store)
      assert.equal((await listAll(store)).length, PEOPLE.length)
    })

    it('refuses a NUL in the actor or request id of a change with bad_request, changing nothing', async (t) => {
      const store = await openStore(t, factory)
      const ada = await store.create(makeUser())
      const before = await snapshotStore(store)
      const refused = { name: 'ServiceError', code: 'bad_request' }
      for (const context of [{ actor: 'tok\u0000en' }, { requestId: 'req\u0000' }]) {
        await assert.rejects(store.create(makeUser(), undefined, context), refused)
        await assert.rejects(store.update(ada.user.id, increment, context), refused)
        await assert.rejects(store.delete(ada.user.id, undefined, context), refused)
      }
      assert.deepEqual(await snapshotStore(store), before)
      assertHealthy(store)
    })

    it('answers undefined for ids no user can have (a NUL, not a UUID) without a fault', async (t) => {
      const store = await openStore(t, factory)
      await store.create(makeUser())
      for (const id of ['\u0000', `${makeUser().id}\u0000`, 'not-a-uuid']) {
        assert.equal(await store.get(id), undefined)
        assert.equal(await store.isDeleted(id), false)
        assert.deepEqual(await store.getMany?.([id]), [])
        assert.deepEqual(await store.subjectOf(id), {
          status: undefined,
          deleted: false,
          tokensValidAfter: undefined,
        })
      }
      assertHealthy(store)
    })

    it('keeps versions exactly up to MAX_USER_VERSION (2^53 - 2), past 32 bits', async (t) => {
      const store = await openStore(t, factory)
      const wide = await store.create(makeUser({ version: 2 ** 31 }))
      const next = await store.update(wide.user.id, increment)
      assert.equal(next.user.version, 2 ** 31 + 1)
      assert.equal(next.etag, `"v${2 ** 31 + 1}"`)
      assert.deepEqual(await store.get(wide.user.id), next)
      const top = await store.create(makeUser({ version: MAX_USER_VERSION - 1 }))
      const last = await store.update(top.user.id, increment)
      assert.equal(last.user.version, MAX_USER_VERSION)
      assert.equal(last.etag, '"v9007199254740990"')
      assert.deepEqual(await store.get(top.user.id), last)
      assertHealthy(store)
    })

    it('refuses the change past MAX_USER_VERSION with version_exhausted, changing nothing; the user can still be deleted', async (t) => {
      const store = await openStore(t, factory)
      const top = await store.create(makeUser({ version: MAX_USER_VERSION }))
      const before = await snapshotStore(store)
      await assert.rejects(store.update(top.user.id, increment), {
        name: 'ServiceError',
        code: 'version_exhausted',
      })
      assert.deepEqual(await snapshotStore(store), before)
      // A change that changes nothing keeps the version, so it is no change past the top.
      assert.deepEqual(await store.update(top.user.id, () => undefined), top)
      assertHealthy(store)
      await store.delete(top.user.id)
      assert.equal(await store.get(top.user.id), undefined)
      assert.equal(await store.isDeleted(top.user.id), true)
    })

    it('refuses a create whose version is outside 1..MAX_USER_VERSION with validation_failed naming /version, changing nothing', async (t) => {
      const store = await openStore(t, factory)
      await store.create(makeUser())
      const before = await snapshotStore(store)
      for (const version of [
        0,
        -1,
        1.5,
        MAX_USER_VERSION + 1,
        MAX_USER_VERSION + 2,
        2 ** 63,
        Number.NaN,
        Number.POSITIVE_INFINITY,
      ]) {
        await assert.rejects(
          store.create(makeUser({ version })),
          {
            name: 'ServiceError',
            code: 'validation_failed',
            errors: [
              {
                pointer: '/version',
                code: 'out_of_range',
                message: `version must be a whole number from 1 to ${MAX_USER_VERSION}.`,
              },
            ],
          },
          String(version),
        )
      }
      assert.deepEqual(await snapshotStore(store), before)
      assertHealthy(store)
    })
  })

  describe(`${label}: cursor edges`, () => {
    const FIRST_ID = '00000000-0000-7000-8000-000000000000'
    const LAST_ID = 'ffffffff-ffff-7fff-bfff-ffffffffffff'
    const FILTERS: readonly ListFilter[] = [
      {},
      { statuses: ['active'] },
      { statuses: ['pending', 'suspended'] },
      { q: 'a' },
      { email: 'ewd@tue.example' },
    ]

    /** What a page after `after` must hold: computed from the stored users, not from the store's list. */
    const expected = (
      people: readonly User[],
      filter: ListFilter,
      order: 'asc' | 'desc',
      after: string,
      limit: number,
    ): { ids: string[]; hasMore: boolean } => {
      const selected = people.filter(
        (user) =>
          (filter.statuses === undefined || filter.statuses.includes(user.status)) &&
          (filter.email === undefined || user.email.toLowerCase() === filter.email) &&
          (filter.q === undefined ||
            user.email.toLowerCase().includes(filter.q) ||
            user.name.toLowerCase().includes(filter.q)),
      )
      const ids = selected.map((user) => user.id).sort()
      const beyond =
        order === 'asc' ? ids.filter((id) => id > after) : ids.filter((id) => id < after).reverse()
      return { ids: beyond.slice(0, limit), hasMore: beyond.length > limit }
    }

    it('answers an empty last page after the last id, and before the first in descending order', async (t) => {
      const store = await openStore(t, factory)
      const people = await seedPeople(store)
      const ids = people.map((user) => user.id)
      for (const filter of FILTERS) {
        for (const [order, after] of [
          ['asc', ids.at(-1)],
          ['desc', ids[0]],
          ['asc', LAST_ID],
          ['desc', FIRST_ID],
        ] as const) {
          assert.deepEqual(
            await store.list({ filter, order, limit: 3, after: after ?? '' }),
            { items: [], hasMore: false },
            `${JSON.stringify(filter)} ${order} ${String(after)}`,
          )
        }
      }
    })

    it('continues after ids that never existed: before the first, between two users, after the last', async (t) => {
      const store = await openStore(t, factory)
      const people = await seedPeople(store)
      const ids = people.map((user) => user.id).sort()
      // Greater than the fourth id and smaller than anything that starts like the fifth.
      const between = `${(ids[3] ?? '').slice(0, 24)}ffffffffffff`
      assert.equal(ids.includes(between), false)
      for (const filter of FILTERS) {
        for (const after of [FIRST_ID, between, LAST_ID]) {
          for (const order of ['asc', 'desc'] as const) {
            const page = await store.list({ filter, order, limit: 2, after })
            const want = expected(people, filter, order, after, 2)
            assert.deepEqual(
              page.items.map((record) => record.user.id),
              want.ids,
              `${JSON.stringify(filter)} ${order} ${after}`,
            )
            assert.equal(page.hasMore, want.hasMore, `${JSON.stringify(filter)} ${order} ${after}`)
          }
        }
      }
    })

    it('continues after a deleted id with every filter, in both orders', async (t) => {
      const store = await openStore(t, factory)
      const people = await seedPeople(store)
      const gone = people[3]
      assert.ok(gone)
      await store.delete(gone.id)
      const left = people.filter((user) => user.id !== gone.id)
      for (const filter of FILTERS) {
        for (const order of ['asc', 'desc'] as const) {
          const page = await store.list({ filter, order, limit: 2, after: gone.id })
          const want = expected(left, filter, order, gone.id, 2)
          assert.deepEqual(
            page.items.map((record) => record.user.id),
            want.ids,
            `${JSON.stringify(filter)} ${order}`,
          )
          assert.equal(page.hasMore, want.hasMore, `${JSON.stringify(filter)} ${order}`)
        }
      }
    })
  })
}
