import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { FileStore } from '../../src/store/file/file-store.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import type { Store } from '../../src/store/store.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../helpers/postgres.js'
import { makeTempDir, startService, type TestService } from '../helpers/service.js'
import { type FeedPage, feedReader } from './feed-fixtures.js'

/** LIST_SCAN_BUDGET in these tests: a filtered page examines at most this many events. */
const BUDGET = 10

interface Kind {
  readonly name: string
  readonly skip: string | false
  /** Whether its filtered pages stop at the budget (the PostgreSQL feed filters in its query). */
  readonly budgeted: boolean
  make(t: TestContext): Promise<Store>
}

const KINDS: readonly Kind[] = [
  {
    name: 'file store',
    skip: false,
    budgeted: true,
    async make(t) {
      return new FileStore({ dataDir: path.join(await makeTempDir(t, 'feed-budget-'), 'data') })
    },
  },
  {
    name: 'PostgreSQL',
    skip: SKIP_POSTGRES,
    budgeted: false,
    make(t) {
      const store = new PostgresStore({ url: requireDatabaseUrl(), schema: freshSchema(t) })
      t.after(() => store.close())
      return Promise.resolve(store)
    },
  },
]

async function page(svc: TestService, query: string): Promise<FeedPage> {
  const res = await svc.call('GET', `/events?${query}`, { token: feedReader })
  assert.equal(res.status, 200, res.text.slice(0, 300))
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
  return res.json<FeedPage>()
}

/** Follows nextCursor from the start until a page makes no progress; every page and every id. */
async function walk(
  svc: TestService,
  query: string,
): Promise<{ pages: FeedPage[]; ids: string[] }> {
  const pages: FeedPage[] = []
  let after: string | undefined
  for (;;) {
    const next = await page(svc, `${query}${after === undefined ? '' : `&after=${after}`}`)
    pages.push(next)
    if (next.nextCursor === after) break
    assert.ok(after === undefined || next.nextCursor > after, 'the cursor moves on')
    assert.ok(pages.length <= 100, `no end after ${pages.length} pages`)
    after = next.nextCursor
  }
  return { pages, ids: pages.flatMap((each) => each.items.map((event) => event.id)) }
}

/**
 * 44 events: a user created and deleted, 40 users created, then one more created and deleted. The
 * deletions sit at both ends of the feed, so the pages between find nothing.
 */
async function seed(
  svc: TestService,
): Promise<{ all: string[]; deletions: string[]; last: string }> {
  const first = await svc.createUser()
  assert.equal((await svc.call('DELETE', `/users/${first.id}`)).status, 204)
  for (let i = 0; i < 40; i += 1) await svc.createUser()
  const late = await svc.createUser()
  assert.equal((await svc.call('DELETE', `/users/${late.id}`)).status, 204)
  const whole = await page(svc, 'limit=1000')
  const all = whole.items.map((event) => event.id)
  assert.equal(all.length, 44)
  const deletions = whole.items.filter((event) => event.type === 'user.deleted')
  assert.deepEqual(
    deletions.map((event) => event.userId),
    [first.id, late.id],
  )
  return { all, deletions: deletions.map((event) => event.id), last: late.id }
}

for (const kind of KINDS) {
  describe(`filtered pages of the feed under LIST_SCAN_BUDGET: ${kind.name}`, {
    skip: kind.skip,
  }, () => {
    it('ends a filtered page after the budget with a cursor that resumes it, and the walk returns every match once', async (t) => {
      const svc = await startService(t, { store: await kind.make(t), listScanBudget: BUDGET })
      const { all, deletions, last } = await seed(svc)

      const firstPage = await page(svc, 'type=user.deleted&limit=100')
      if (kind.budgeted) {
        assert.deepEqual(
          firstPage.items.map((event) => event.id),
          [deletions[0]],
          'only the match among the first events examined',
        )
        assert.equal(firstPage.nextCursor, all[BUDGET - 1], 'resumes after the last examined')
        const empty = await page(svc, `type=user.deleted&limit=100&after=${firstPage.nextCursor}`)
        assert.deepEqual(empty.items, [], 'a page of the middle finds nothing')
        assert.equal(empty.nextCursor, all[2 * BUDGET - 1], 'and still says where to go on')
      }

      const byType = await walk(svc, 'type=user.deleted&limit=100')
      assert.deepEqual(byType.ids, deletions, 'every deletion once, in order')
      const byUser = await walk(svc, `userId=${last}&limit=100`)
      assert.deepEqual(byUser.ids, all.slice(-2), "the late user's two events once")
      if (kind.budgeted)
        assert.ok(byType.pages.length >= all.length / BUDGET, 'pages stopped early')

      // No filter: no budget, a page is bounded by its limit.
      const unfiltered = await page(svc, 'limit=1000')
      assert.equal(unfiltered.items.length, all.length)
    })
  })
}
