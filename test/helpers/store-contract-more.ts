import assert from 'node:assert/strict'
import { rm } from 'node:fs/promises'
import { describe, it } from 'node:test'

import { ServiceError } from '../../src/domain/errors.js'
import type { Store } from '../../src/store/store.js'
import type { StoreFactory } from './store-suite.js'
import { changeUser, makeUser } from './store-users.js'

type Opener = (t: Parameters<StoreFactory>[0], factory: StoreFactory) => Promise<Store>

/** Every event of the feed, following the cursor page by page (`limit` per page). */
async function readAll(store: Store, limit = 100, after?: string) {
  const items = []
  let cursor = after
  for (;;) {
    const page = await store.events.read({
      limit,
      ...(cursor === undefined ? {} : { after: cursor }),
    })
    items.push(...page.items)
    if (page.items.length === 0) return { items, cursor: page.nextCursor }
    cursor = page.nextCursor
  }
}

/**
 * The rest of the Store contract: the change feed, tombstones, subjectOf, getMany, the scan
 * budget, each error class, capabilities. Registered by describeStoreContract.
 */
export function describeMoreStoreContract(
  label: string,
  factory: StoreFactory,
  openStore: Opener,
): void {
  describe(`${label}: change feed`, () => {
    it('appends one event per change, in order, naming the actor and request id given', async (t) => {
      const store = await openStore(t, factory)
      const start = (await readAll(store)).cursor
      const context = { actor: 'admin-1', requestId: 'req-1' }
      const user = (await store.create(makeUser(), undefined, context)).user
      await store.update(
        user.id,
        (current) => changeUser(current.user, { name: 'Renamed' }),
        context,
      )
      await store.update(user.id, (current) => changeUser(current.user, { status: 'active' }), {})
      await store.delete(user.id, undefined, { actor: 'admin-2' })
      const { items } = await readAll(store, 100, start)
      assert.deepEqual(
        items.map((event) => [event.type, event.userId, event.version]),
        [
          ['user.created', user.id, 1],
          ['user.updated', user.id, 2],
          ['user.activated', user.id, 3],
          ['user.deleted', user.id, 4],
        ],
      )
      assert.deepEqual([items[0]?.actor, items[0]?.requestId], ['admin-1', 'req-1'])
      assert.deepEqual(items[1]?.changed, ['name'])
      assert.deepEqual([items[2]?.actor, items[2]?.requestId], [undefined, undefined])
      assert.equal(items[3]?.actor, 'admin-2')
      assert.equal(items[3]?.userJson, undefined)
      assert.deepEqual(JSON.parse(items[0]?.userJson ?? 'null'), user)
      const ids = items.map((event) => event.id)
      assert.deepEqual([...ids].sort(), ids)
      assert.equal(new Set(ids).size, ids.length)
    })

    it('lets exactly one of 10 concurrent creates of one id succeed, with one event', async (t) => {
      const store = await openStore(t, factory)
      const start = (await readAll(store)).cursor
      const user = makeUser()
      // Another create first, so that a store which groups creates takes the ten together next.
      const other = store.create(makeUser())
      const results = await Promise.allSettled(Array.from({ length: 10 }, () => store.create(user)))
      const otherId = (await other).user.id
      assert.equal(results.filter((result) => result.status === 'fulfilled').length, 1)
      for (const result of results) {
        if (result.status === 'rejected')
          assert.equal((result.reason as { code?: unknown }).code, 'duplicate_id')
      }
      const { items } = await readAll(store, 100, start)
      // One event each, in whichever order the two users' creates committed.
      assert.deepEqual(
        items.map((event) => `${event.type} ${event.userId}`).sort(),
        [`user.created ${otherId}`, `user.created ${user.id}`].sort(),
      )
    })

    it('appends no event for a change that changes nothing, a refused change or a failed check', async (t) => {
      const store = await openStore(t, factory)
      const user = (await store.create(makeUser({ email: 'one@example.com' }))).user
      await store.create(makeUser({ email: 'two@example.com' }))
      const { cursor } = await readAll(store)
      assert.equal((await store.update(user.id, () => undefined)).user.version, 1)
      await assert.rejects(
        store.update(user.id, (current) => changeUser(current.user, { email: 'TWO@example.com' })),
        { code: 'duplicate_email' },
      )
      const refused = new ServiceError('precondition_failed', 'refused by its check')
      await assert.rejects(
        store.delete(user.id, () => {
          throw refused
        }),
        refused,
      )
      await assert.rejects(
        store.create(makeUser(), () => {
          throw refused
        }),
        refused,
      )
      assert.deepEqual((await readAll(store, 100, cursor)).items, [])
    })

    it('pages with limit and resumes from nextCursor without repeating or skipping an event', async (t) => {
      const store = await openStore(t, factory)
      const start = (await readAll(store)).cursor
      for (let i = 0; i < 7; i += 1) await store.create(makeUser())
      const whole = (await readAll(store, 100, start)).items.map((event) => event.id)
      const paged = (await readAll(store, 3, start)).items.map((event) => event.id)
      assert.equal(whole.length, 7)
      assert.deepEqual(paged, whole)
      const first = await store.events.read({ limit: 3, after: start })
      assert.equal(first.items.length, 3)
      assert.equal(first.nextCursor, first.items[2]?.id)
    })

    it('counts the events this process appended', async (t) => {
      const store = await openStore(t, factory)
      const before = store.events.appended
      await store.create(makeUser())
      assert.equal(store.events.appended, before + 1)
    })
  })

  describe(`${label}: tombstones and subjects`, () => {
    it('keeps a tombstone: isDeleted and subjectOf say so, and the id is never taken again (duplicate_id)', async (t) => {
      const store = await openStore(t, factory)
      const user = (await store.create(makeUser({ status: 'suspended' }))).user
      assert.deepEqual(await store.subjectOf(user.id), {
        status: 'suspended',
        deleted: false,
        tokensValidAfter: undefined,
      })
      assert.equal(await store.isDeleted(user.id), false)
      await store.delete(user.id)
      assert.equal(await store.get(user.id), undefined)
      assert.equal(await store.isDeleted(user.id), true)
      assert.deepEqual(await store.subjectOf(user.id), {
        status: undefined,
        deleted: true,
        tokensValidAfter: undefined,
      })
      await assert.rejects(store.create(makeUser({ id: user.id })), {
        name: 'ServiceError',
        code: 'duplicate_id',
      })
      assert.equal(await store.get(user.id), undefined)
      await assert.rejects(store.delete(user.id), { name: 'ServiceError', code: 'not_found' })
    })

    it('keeps tokensValidAfter: subjectOf and get show it, a change to it is one user.tokens_revoked event', async (t) => {
      const store = await openStore(t, factory)
      const plain = await store.create(makeUser())
      assert.equal(plain.json.includes('tokensValidAfter'), false)
      const at = '2030-01-02T03:04:05.000Z'
      const revoked = await store.update(plain.user.id, (current) => ({
        ...current.user,
        tokensValidAfter: at,
        version: current.user.version + 1,
      }))
      assert.equal(revoked.user.tokensValidAfter, at)
      assert.equal((await store.get(plain.user.id))?.json, revoked.json)
      assert.deepEqual(await store.subjectOf(plain.user.id), {
        status: plain.user.status,
        deleted: false,
        tokensValidAfter: at,
      })
      const page = await readAll(store)
      assert.deepEqual(
        page.items.filter((event) => event.userId === plain.user.id).map((event) => event.type),
        ['user.created', 'user.tokens_revoked'],
      )
      const imported = await store.create(makeUser({ tokensValidAfter: at }))
      assert.equal((await store.get(imported.user.id))?.user.tokensValidAfter, at)
    })

    it('answers subjectOf for unknown ids and ids no user can have without a fault', async (t) => {
      const store = await openStore(t, factory)
      for (const id of [makeUser().id, 'first-start-admin', 'a\u0000b', '']) {
        assert.deepEqual(await store.subjectOf(id), {
          status: undefined,
          deleted: false,
          tokensValidAfter: undefined,
        })
      }
      assert.equal(store.health().state, 'ok')
    })

    it('getAs gives what get and subjectOf give, for the same user or another, whatever each is', async (t) => {
      const store = await openStore(t, factory)
      const at = '2030-01-02T03:04:05.000Z'
      const active = await store.create(makeUser({ status: 'active', tokensValidAfter: at }))
      const suspended = await store.create(makeUser({ status: 'suspended' }))
      const gone = (await store.create(makeUser())).user.id
      await store.delete(gone)
      const ids = [active.user.id, suspended.user.id, gone, makeUser().id, 'not-an-id', '']
      for (const id of ids) {
        for (const subject of ids) {
          const read = await store.getAs(id, subject)
          assert.deepEqual(read, {
            record: await store.get(id),
            subject: await store.subjectOf(subject),
          })
        }
      }
      // Spot checks, so that the comparison above cannot pass on two wrong answers.
      assert.deepEqual(await store.getAs(suspended.user.id, active.user.id), {
        record: suspended,
        subject: { status: 'active', deleted: false, tokensValidAfter: at },
      })
      assert.deepEqual(await store.getAs(gone, gone), {
        record: undefined,
        subject: { status: undefined, deleted: true, tokensValidAfter: undefined },
      })
      assert.equal(store.health().state, 'ok')
    })
  })

  describe(`${label}: getMany`, () => {
    it('returns the users of the ids that exist, leaving out unknown, deleted and impossible ids', async (t) => {
      const store = await openStore(t, factory)
      const [a, b, gone] = [
        await store.create(makeUser()),
        await store.create(makeUser()),
        await store.create(makeUser()),
      ]
      await store.delete(gone.user.id)
      const found = await store.getMany([
        b.user.id,
        makeUser().id,
        a.user.id,
        gone.user.id,
        'nope',
        'a\u0000b',
      ])
      assert.deepEqual(found.map((record) => record.json).sort(), [a.json, b.json].sort())
      assert.deepEqual(await store.getMany([]), [])
    })
  })

  describe(`${label}: scan budget`, () => {
    it('stops a q page after the budget with hasMore and resumeAfter, and the walk finds every match once', async (t) => {
      const store = await openStore(t, factory)
      const users = []
      for (let i = 0; i < 9; i += 1)
        users.push(
          (await store.create(makeUser({ name: i % 3 === 0 ? `Needle ${i}` : `Hay ${i}` }))).user,
        )
      const first = await store.list({
        filter: { q: 'needle' },
        order: 'asc',
        limit: 10,
        scanBudget: 2,
      })
      assert.equal(first.hasMore, true)
      assert.equal(first.resumeAfter, users[1]?.id)
      assert.deepEqual(
        first.items.map((record) => record.user.id),
        [users[0]?.id],
      )
      const found: string[] = []
      let after: string | undefined
      for (let pages = 0; pages < 20; pages += 1) {
        const page = await store.list({
          filter: { q: 'needle' },
          order: 'asc',
          limit: 10,
          scanBudget: 2,
          ...(after === undefined ? {} : { after }),
        })
        found.push(...page.items.map((record) => record.user.id))
        if (!page.hasMore) break
        after = page.resumeAfter
      }
      assert.deepEqual(found, [users[0]?.id, users[3]?.id, users[6]?.id])
    })
  })

  describe(`${label}: capabilities and health`, () => {
    it('declares its capabilities and starts healthy, knowing its count or saying it does not', async (t) => {
      const store = await openStore(t, factory)
      const { capabilities } = store
      assert.deepEqual(Object.keys(capabilities).sort(), [
        'dataDir',
        'durable',
        'shared',
        'turnsReadOnly',
      ])
      assert.equal(store.health().state, 'ok')
      store.lock()
      await store.prepare()
      const count = store.count()
      if (count !== undefined) {
        await store.create(makeUser())
        assert.equal(store.count(), count + 1)
      }
    })

    it('refuses writes with storage_unavailable once it turns read-only, and keeps reads', async (t) => {
      const store = await openStore(t, factory)
      const { dataDir, turnsReadOnly } = store.capabilities
      if (!turnsReadOnly || dataDir === undefined) {
        t.skip('this store cannot be made read-only from outside')
        return
      }
      const user = (await store.create(makeUser())).user
      await rm(dataDir, { recursive: true, force: true })
      const deadline = Date.now() + 5000
      while (store.health().state !== 'read_only' && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20))
      assert.equal(store.health().state, 'read_only')
      await assert.rejects(store.create(makeUser()), {
        name: 'ServiceError',
        code: 'storage_unavailable',
      })
      await assert.rejects(
        store.update(user.id, (current) => changeUser(current.user, { name: 'No' })),
        { name: 'ServiceError', code: 'storage_unavailable' },
      )
      await assert.rejects(store.delete(user.id), {
        name: 'ServiceError',
        code: 'storage_unavailable',
      })
      assert.deepEqual((await store.get(user.id))?.user, user)
    })
  })
}
