import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import pg from 'pg'

import { PostgresStore } from '../../../src/store/postgres/postgres-store.js'
import { feedReader, feedWriter } from '../../events/feed-fixtures.js'
import { openSse } from '../../events/sse-client.js'
import { type RunningChild, startChild } from '../../helpers/child.js'
import { request } from '../../helpers/http.js'
import {
  freshDatabase,
  freshSchema,
  requireDatabaseUrl,
  SKIP_POSTGRES,
} from '../../helpers/postgres.js'
import { makeTempDir, startService, uniqueEmail } from '../../helpers/service.js'
import { changeUser, makeUser } from '../../helpers/store-users.js'

/**
 * §10 under load on PostgreSQL: 16 writers commit on two stores (or two service processes, one of
 * them with WORKERS=2) on one database while a reader polls the feed with its cursor. Event ids
 * are taken from a counter row as the last statement of each transaction, so they follow the
 * order of the commits: the reader must never see an event before one with a smaller id, or it
 * would skip that one for good.
 */

const WRITERS = 16
const ROUNDS = 5
const HOT_USERS = 4
/**
 * Events a poll asks for: one reader with small pages takes many cursors while the writers run,
 * one with large pages stays at the head of the feed, where an event could slip behind it.
 */
const PAGES = [7, 1000] as const

interface FeedItem {
  id: string
  type: string
  userId: string
  version: number
}

interface Page {
  items: readonly FeedItem[]
  nextCursor: string
}

/** One page read while the writers ran: where it began, the ids it held, where it resumed. */
interface Read {
  after: string | undefined
  ids: string[]
  next: string
}

type ReadPage = (after: string | undefined, poll: number, limit: number) => Promise<Page>

/** What the writers did: `userId version` of each acknowledged change, and whether they finished. */
interface Writes {
  changes: string[]
  finished: boolean
}

/**
 * Polls the feed from its start with the cursor of each page until the writers have finished and
 * as many events as they acknowledged were read (or the whole feed has them all and this reader
 * has read everything it will: it skipped some), checking each page as it comes: ids strictly
 * increasing across pages, each after the cursor asked with, and a cursor that never goes back.
 */
async function follow(read: ReadPage, limit: number, writes: Writes, timeoutMs: number) {
  const reads: Read[] = []
  const items: FeedItem[] = []
  const deadline = Date.now() + timeoutMs
  let cursor: string | undefined
  let settled = false
  for (let poll = 0; !writes.finished || items.length < writes.changes.length; poll += 1) {
    assert.ok(
      Date.now() < deadline,
      `read ${items.length} events of ${writes.changes.length} before the deadline`,
    )
    const page = await read(cursor, poll, limit)
    reads.push({ after: cursor, ids: page.items.map((item) => item.id), next: page.nextCursor })
    for (const item of page.items) {
      const previous = items.at(-1)?.id ?? cursor
      assert.ok(previous === undefined || item.id > previous, `${item.id} after ${previous}`)
      items.push(item)
    }
    const last = page.items.at(-1)?.id
    if (cursor !== undefined) assert.ok(page.nextCursor >= cursor, 'the cursor never goes back')
    if (last !== undefined) assert.ok(page.nextCursor >= last, 'the cursor is past the page')
    cursor = page.nextCursor
    if (page.items.length > 0) continue
    // An empty page read after the whole feed was seen complete: nothing more will come. An
    // empty page read before it proves nothing (its events may have turned final since).
    if (settled) break
    settled = writes.finished && (await wholeFeed(read)).length >= writes.changes.length
  }
  return { reads, items }
}

/** Every event of the feed, read after the writers and the follower are done. */
async function wholeFeed(read: ReadPage): Promise<FeedItem[]> {
  const items: FeedItem[] = []
  let cursor: string | undefined
  for (let poll = 0; ; poll += 1) {
    const page = await read(cursor, poll, 1000)
    if (page.items.length === 0) return items
    items.push(...page.items)
    cursor = page.nextCursor
  }
}

/**
 * The promises of §10 as one reader saw them: every event exactly once (what it read is the whole
 * feed, read again afterwards, in the same order), nothing appeared behind a cursor it had read
 * (each page holds exactly the events the whole feed has between its cursor and the next one),
 * one event per acknowledged change and none without one, each user's versions 1…n in order.
 */
function checkFeed(
  followed: { reads: Read[]; items: FeedItem[] },
  whole: FeedItem[],
  writes: Writes,
) {
  const ids = whole.map((item) => item.id)
  assert.deepEqual(
    followed.items.map((item) => item.id),
    ids,
    'the follower read every event exactly once',
  )
  for (const { after, ids: read, next } of followed.reads) {
    const between = ids.filter((id) => (after === undefined || id > after) && id <= next)
    assert.deepEqual(read, between, `the events between ${after} and ${next}, as read then`)
    if (read.length > 0) assert.ok(after === undefined || next > after, 'a page moves the cursor')
  }
  assert.ok(
    followed.reads.filter((read) => read.ids.length > 0).length > 10,
    'the reader read many pages while the writers ran',
  )
  const changes = whole.map((item) => `${item.userId} ${item.version}`)
  assert.deepEqual([...changes].sort(), [...writes.changes].sort(), 'one event per change')
  const versions = new Map<string, number>()
  for (const item of whole) {
    const before = versions.get(item.userId) ?? 0
    assert.equal(
      item.version,
      before + 1,
      `user ${item.userId}: version ${item.version} after ${before}`,
    )
    versions.set(item.userId, item.version)
  }
}

/** Runs `work(writer)` for every writer at once; marks the writes finished when all are done. */
async function runWriters(writes: Writes, work: (writer: number) => Promise<void>): Promise<void> {
  try {
    await Promise.all(Array.from({ length: WRITERS }, (_, writer) => work(writer)))
  } finally {
    writes.finished = true
  }
}

function pgStore(t: TestContext, schema: string): PostgresStore {
  const store = new PostgresStore({
    url: requireDatabaseUrl(),
    schema,
    eventPollMs: 50,
    poolSize: 12,
  })
  t.after(() => store.close())
  return store
}

/**
 * A service on a fresh schema whose feed polls far less often than a test lasts: only the feed's
 * own re-check can bring an event in time.
 */
async function serviceWithoutPoll(t: TestContext) {
  const store = new PostgresStore({
    url: requireDatabaseUrl(),
    schema: freshSchema(t),
    eventPollMs: 600_000,
  })
  t.after(() => store.close())
  return startService(t, { store })
}

/** An open transaction that has written (it holds a transaction id) and appends no event. */
async function olderTransaction(t: TestContext): Promise<pg.Client> {
  const older = new pg.Client({ connectionString: requireDatabaseUrl() })
  await older.connect()
  t.after(() => older.end())
  await older.query('BEGIN')
  await older.query('SELECT pg_current_xact_id()')
  return older
}

describe('the PostgreSQL feed under 16 concurrent writers', { skip: SKIP_POSTGRES }, () => {
  it('through two stores on one schema: a polling reader sees every event once, in order, nothing behind its cursor', {
    timeout: 120_000,
  }, async (t) => {
    const schema = freshSchema(t)
    const stores = [pgStore(t, schema), pgStore(t, schema)] as const
    for (const store of stores) await store.open()
    const on = (i: number): PostgresStore => stores[i % 2] ?? stores[0]
    const writes: Writes = { changes: [], finished: false }
    const hot: string[] = []
    for (let i = 0; i < HOT_USERS; i += 1) {
      const user = (await on(i).create(makeUser())).user
      hot.push(user.id)
      writes.changes.push(`${user.id} 1`)
    }
    const update = async (store: PostgresStore, id: string, name: string): Promise<void> => {
      const record = await store.update(id, (current) => changeUser(current.user, { name }))
      writes.changes.push(`${id} ${record.user.version}`)
    }
    const read: ReadPage = (after, poll, limit) => on(poll).events.read({ after, limit })
    const [followed] = await Promise.all([
      Promise.all(PAGES.map((limit) => follow(read, limit, writes, 90_000))),
      runWriters(writes, async (writer) => {
        const store = on(writer)
        const own = (await store.create(makeUser())).user
        writes.changes.push(`${own.id} 1`)
        for (let round = 0; round < ROUNDS; round += 1) {
          await update(store, own.id, `Own ${writer}.${round}`)
          // Writers on both stores race on the same few users: compare-and-set decides.
          await update(store, hot[(writer + round) % HOT_USERS] ?? '', `Hot ${writer}.${round}`)
        }
        await store.delete(own.id)
        writes.changes.push(`${own.id} ${ROUNDS + 2}`)
      }),
    ])
    const whole = await wholeFeed(read)
    for (const one of followed) checkFeed(one, whole, writes)
    assert.equal(whole.length, HOT_USERS + WRITERS * (2 * ROUNDS + 2))
    assert.deepEqual(
      whole.filter((item) => item.type === 'user.deleted').length,
      WRITERS,
      'each own user deleted once',
    )
  })

  it('through HTTP on two service processes (one with WORKERS=2): the same, and a live stream too', {
    timeout: 180_000,
  }, async (t) => {
    const url = await freshDatabase(t)
    const root = await makeTempDir(t, 'feed-race-')
    const replicas: RunningChild[] = []
    t.after(() => Promise.all(replicas.map((replica) => replica.stop('SIGKILL'))))
    replicas.push(
      ...(await Promise.all([
        startChild(
          { dataDir: path.join(root, 'a'), env: { DATABASE_URL: url, WORKERS: '2' } },
          60_000,
        ),
        startChild({ dataDir: path.join(root, 'b'), env: { DATABASE_URL: url } }, 60_000),
      ])),
    )
    const base = (i: number): string => replicas[i % replicas.length]?.url ?? ''
    const call = async (i: number, method: string, target: string, json?: unknown) => {
      const res = await request(method, `${base(i)}${target}`, {
        token: feedWriter,
        json,
        ...(method === 'PATCH' ? { contentType: 'application/merge-patch+json' } : {}),
      })
      return res
    }
    const writes: Writes = { changes: [], finished: false }
    const create = async (i: number): Promise<string> => {
      const res = await call(i, 'POST', '/users', { email: uniqueEmail('race'), name: 'Racer' })
      assert.equal(res.status, 201, res.text)
      const id = res.json<{ id: string }>().id
      writes.changes.push(`${id} 1`)
      return id
    }
    const rename = async (i: number, id: string, name: string): Promise<number> => {
      const res = await call(i, 'PATCH', `/users/${id}`, { name })
      assert.equal(res.status, 200, res.text)
      const version = res.json<{ version: number }>().version
      writes.changes.push(`${id} ${version}`)
      return version
    }
    const hot: string[] = []
    for (let i = 0; i < HOT_USERS; i += 1) hot.push(await create(i))
    const stream = await openSse(`${base(0)}/events`, feedReader)
    t.after(() => {
      stream.close()
    })
    const read: ReadPage = async (after, poll, limit) => {
      const query = `limit=${limit}${after === undefined ? '' : `&after=${after}`}`
      const res = await request('GET', `${base(poll)}/events?${query}`, { token: feedReader })
      assert.equal(res.status, 200, res.text)
      return res.json<Page>()
    }
    const [followed] = await Promise.all([
      Promise.all(PAGES.map((limit) => follow(read, limit, writes, 150_000))),
      runWriters(writes, async (writer) => {
        const own = await create(writer)
        let version = 1
        for (let round = 0; round < ROUNDS; round += 1) {
          version = await rename(writer + round, own, `Own ${writer}.${round}`)
          await rename(
            writer + round + 1,
            hot[(writer + round) % HOT_USERS] ?? '',
            `Hot ${writer}.${round}`,
          )
        }
        const res = await call(writer + 1, 'DELETE', `/users/${own}`)
        assert.equal(res.status, 204, res.text)
        writes.changes.push(`${own} ${version + 1}`)
      }),
    ])
    const whole = await wholeFeed(read)
    for (const one of followed) checkFeed(one, whole, writes)
    assert.equal(whole.length, HOT_USERS + WRITERS * (2 * ROUNDS + 2))
    await stream.waitFor(whole.length, 30_000)
    assert.deepEqual(
      stream.events.map((event) => event.id),
      whole.map((item) => item.id),
      'the live stream: every event once, in order',
    )
  })

  it('is not held back by an older transaction that holds a transaction id: the event is listed and streamed at once, without NOTIFY or the poll', {
    timeout: 60_000,
  }, async (t) => {
    const svc = await serviceWithoutPoll(t)
    await svc.createUser()
    const stream = await openSse(`${svc.baseUrl}/events`, feedReader)
    t.after(() => {
      stream.close()
    })
    await stream.waitFor(1)
    const first = stream.events[0]?.id ?? ''
    const older = await olderTransaction(t)
    try {
      const user = await svc.createUser()
      const now = await request('GET', `${svc.baseUrl}/events?after=${first}`, {
        token: feedReader,
      })
      assert.equal(now.status, 200, now.text)
      assert.deepEqual(
        now.json<Page>().items.map((item) => item.userId),
        [user.id],
      )
      await stream.waitFor(2, 2000)
      const data = JSON.parse(stream.events[1]?.data ?? '{}') as FeedItem
      assert.equal(data.userId, user.id)
    } finally {
      await older.query('COMMIT')
    }
  })
})
