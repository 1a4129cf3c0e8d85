import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { type ChangeEvent, eventJson } from '../../src/domain/event.js'
import { EVENT_PAGE_MAX_BYTES, type EventFeed } from '../../src/store/event-feed.js'
import { FileStore } from '../../src/store/file/file-store.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import type { Store } from '../../src/store/store.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES, sql } from '../helpers/postgres.js'
import { makeTempDir, startService, type TestService } from '../helpers/service.js'
import { changeUser, makeUser } from '../helpers/store-users.js'
import {
  bigMetadata,
  createBigUser,
  type FeedPage,
  feedReader,
  pageBytes,
  patchMetadata,
  readWholeFeed,
} from './feed-fixtures.js'

interface Kind {
  readonly name: string
  readonly skip: string | false
  /** A fresh store, closed when the test ends, and (PostgreSQL) its schema. */
  make(t: TestContext): Promise<{ store: Store; schema?: string }>
}

const KINDS: readonly Kind[] = [
  {
    name: 'file store',
    skip: false,
    async make(t) {
      return {
        store: new FileStore({ dataDir: path.join(await makeTempDir(t, 'feed-pages-'), 'data') }),
      }
    },
  },
  {
    name: 'PostgreSQL',
    skip: SKIP_POSTGRES,
    make(t) {
      const schema = freshSchema(t)
      const store = new PostgresStore({ url: requireDatabaseUrl(), schema, eventPollMs: 50 })
      t.after(() => store.close())
      return Promise.resolve({ store, schema })
    },
  },
]

async function page(svc: TestService, query: string): Promise<FeedPage> {
  const res = await svc.call('GET', `/events${query}`, { token: feedReader })
  assert.equal(res.status, 200, res.text.slice(0, 300))
  return res.json<FeedPage>()
}

/** Reads a store's whole feed with a byte bound, following nextCursor; returns the pages. */
async function pagesOf(feed: EventFeed, maxBytes: number, limit = 1000): Promise<ChangeEvent[][]> {
  const pages: ChangeEvent[][] = []
  let after: string | undefined
  for (;;) {
    const next = await feed.read({ after, limit, maxBytes })
    if (next.items.length === 0) return pages
    pages.push([...next.items])
    assert.ok(after === undefined || next.nextCursor > after, 'the cursor moves on')
    after = next.nextCursor
  }
}

for (const kind of KINDS) {
  describe(`pages of the feed bounded in bytes: ${kind.name}`, { skip: kind.skip }, () => {
    it('ends a page of limit=1000 before 1 MiB of events, with a nextCursor that resumes it: every event once, also filtered', async (t) => {
      const { store } = await kind.make(t)
      const svc = await startService(t, { store })
      const id = await createBigUser(svc.baseUrl, 'a')
      for (let i = 0; i < 30; i += 1) await patchMetadata(svc.baseUrl, id, `v${i}`)
      const res = await svc.call('GET', '/events?limit=1000', { token: feedReader })
      assert.equal(res.status, 200)
      const first = res.json<FeedPage>()
      const size = Buffer.byteLength(JSON.stringify(first.items[0]))
      assert.ok(size > 40_000, `an event of ${size} bytes`)
      assert.equal(
        first.items.length,
        Math.floor(EVENT_PAGE_MAX_BYTES / size),
        'as many events as fit in 1 MiB',
      )
      assert.ok(pageBytes(res) <= EVENT_PAGE_MAX_BYTES)
      assert.equal(first.nextCursor, first.items.at(-1)?.id)
      const rest = await page(svc, `?limit=1000&after=${first.nextCursor}`)
      assert.deepEqual(
        [...first.items, ...rest.items].map((event) => event.version),
        Array.from({ length: 31 }, (_, i) => i + 1),
      )
      for (const query of [
        'limit=1000',
        'limit=1000&type=user.updated',
        `limit=1000&userId=${id}`,
      ]) {
        const { items, pages } = await readWholeFeed(svc.baseUrl, query)
        const expected = query.includes('type=') ? 30 : 31
        assert.equal(items.length, expected, query)
        assert.equal(new Set(items.map((event) => event.id)).size, expected, query)
        assert.ok(pages.length >= 3, `${query}: ${pages.length} pages`)
      }
    })

    it('takes one event per page when one alone passes the bound, and stops before the event that would pass it', async (t) => {
      const { store } = await kind.make(t)
      await store.open()
      t.after(() => store.close())
      const feed = store.events
      assert.ok(feed !== undefined)
      const user = (await store.create(makeUser({ metadata: bigMetadata('b') }))).user
      await store.update(user.id, (current) => changeUser(current.user, { name: 'Second' }))
      await store.update(user.id, (current) => changeUser(current.user, { name: 'Third' }))
      const all = (await feed.read({ limit: 10 })).items
      assert.equal(all.length, 3)
      const sizes = all.map((event) => Buffer.byteLength(eventJson(event)))
      assert.deepEqual(
        (await pagesOf(feed, 1)).map((items) => items.length),
        [1, 1, 1],
      )
      // Exactly the first two fit; one byte less and only the first.
      const two = (sizes[0] ?? 0) + (sizes[1] ?? 0)
      const fits = await feed.read({ limit: 10, maxBytes: two })
      assert.deepEqual(
        fits.items.map((event) => event.version),
        [1, 2],
      )
      assert.equal(fits.nextCursor, all[1]?.id)
      const short = await feed.read({ limit: 10, maxBytes: two - 1 })
      assert.deepEqual(
        short.items.map((event) => event.version),
        [1],
      )
      const resumed = await feed.read({ limit: 10, maxBytes: two - 1, after: short.nextCursor })
      assert.deepEqual(
        resumed.items.map((event) => event.version),
        [2],
      )
      // A filtered page that stops early resumes just before the match it left out.
      const filtered = await feed.read({ limit: 10, maxBytes: 1, types: ['user.updated'] })
      assert.deepEqual(
        filtered.items.map((event) => event.version),
        [2],
      )
      const next = await feed.read({
        limit: 10,
        maxBytes: 1,
        types: ['user.updated'],
        after: filtered.nextCursor,
      })
      assert.deepEqual(
        next.items.map((event) => event.version),
        [3],
      )
    })

    it('compares cursors exactly: one ahead of the feed gives an empty page that resumes at that cursor, never before it', async (t) => {
      const { store } = await kind.make(t)
      const svc = await startService(t, { store })
      const user = await svc.createUser()
      const head = (await page(svc, '')).nextCursor
      for (const cursor of [
        '001fffffffffffff',
        '0020000000000000',
        '0020000000000001',
        '0020000000000003',
        '7ffffffffffffffe',
        '7fffffffffffffff',
      ]) {
        for (const filter of ['', '&type=user.deleted', `&userId=${user.id}`]) {
          const ahead = await page(svc, `?after=${cursor}${filter}`)
          assert.deepEqual(ahead.items, [], cursor)
          assert.equal(ahead.nextCursor, cursor, `after=${cursor}${filter}`)
        }
      }
      assert.equal((await svc.call('GET', '/readyz')).status, 200, 'no cursor costs readiness')
      const again = await page(svc, `?after=${head}`)
      assert.deepEqual(again.items, [])
      assert.equal(again.nextCursor, head)
    })

    it('reads cursors past 2^53 from the store exactly (the HTTP layer refuses more than 7fffffffffffffff)', async (t) => {
      const { store } = await kind.make(t)
      await store.open()
      t.after(() => store.close())
      await store.create(makeUser())
      for (const cursor of [
        '0020000000000001',
        '7fffffffffffffff',
        '8000000000000000',
        'ffffffffffffffff',
      ]) {
        const ahead = await store.events?.read({ after: cursor, limit: 10 })
        assert.deepEqual(ahead?.items, [], cursor)
        assert.equal(ahead?.nextCursor, cursor)
      }
    })
  })
}

describe('PostgreSQL event ids past 2^53', { skip: SKIP_POSTGRES }, () => {
  it('serves ids and takes cursors near 2^53 exactly: none rounded, none repeated, none skipped', async (t) => {
    const schema = freshSchema(t)
    const store = new PostgresStore({ url: requireDatabaseUrl(), schema, eventPollMs: 50 })
    t.after(() => store.close())
    const svc = await startService(t, { store })
    await svc.createUser()
    // Ids as they would be after 2^54 of them: the next ones (2^54 + 1, + 2, + 3) are past 2^53
    // and none is a double (doubles there are multiples of 4), so a rounded cursor would show.
    await sql(`UPDATE ${schema}.event_counter SET last_id = 18014398509481984`)
    const users = [await svc.createUser(), await svc.createUser(), await svc.createUser()]
    const whole = await readWholeFeed(svc.baseUrl, 'limit=2')
    const ids = whole.items.map((event) => event.id)
    assert.equal(ids.length, 4)
    const [i1 = '', i2 = '', i3 = ''] = ids.slice(1)
    const value = (id: string): bigint => BigInt(`0x${id}`)
    for (const id of [i1, i2, i3]) {
      assert.ok(value(id) > 2n ** 53n, id)
      assert.notEqual(
        BigInt(Number(value(id))),
        value(id),
        `${id} is not a double: a rounded cursor would show`,
      )
    }
    assert.ok(value(ids[0] ?? '') < 2n ** 53n)
    assert.deepEqual([...ids].sort(), ids)
    const hex = (n: bigint): string => n.toString(16).padStart(16, '0')
    const all = await page(svc, `?after=${hex(value(i1) - 1n)}`)
    assert.deepEqual(
      all.items.map((event) => event.id),
      [i1, i2, i3],
    )
    assert.deepEqual(
      all.items.map((event) => event.userId),
      users.map((user) => user.id),
    )
    assert.equal(all.nextCursor, i3)
    const after1 = await page(svc, `?after=${i1}`)
    assert.deepEqual(
      after1.items.map((event) => event.id),
      [i2, i3],
    )
    const one = await page(svc, `?after=${i2}&limit=1`)
    assert.deepEqual(
      one.items.map((event) => event.id),
      [i3],
    )
    assert.equal(one.nextCursor, i3)
    const beyond = hex(value(i3) + 2n)
    const ahead = await page(svc, `?after=${beyond}`)
    assert.deepEqual(ahead.items, [])
    assert.equal(ahead.nextCursor, beyond)
    const filtered = await page(svc, `?after=${i1}&userId=${users[2]?.id ?? ''}`)
    assert.deepEqual(
      filtered.items.map((event) => event.id),
      [i3],
    )
    assert.equal(filtered.nextCursor, i3)
  })
})

describe("the memory store's feed", () => {
  it('bounds pages by bytes too', async () => {
    const store = new MemoryStore()
    const user = (await store.create(makeUser({ metadata: bigMetadata('m') }))).user
    for (let i = 0; i < 3; i += 1)
      await store.update(user.id, (current) => changeUser(current.user, { name: `N${i}` }))
    const size = Buffer.byteLength(
      eventJson((await store.events.read({ limit: 1 })).items[0] ?? assert.fail('no event')),
    )
    const pages = await pagesOf(store.events, size * 2 + 10)
    assert.deepEqual(
      pages.map((items) => items.length),
      [2, 2],
    )
  })
})
