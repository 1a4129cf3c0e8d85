import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { describe, it, type TestContext } from 'node:test'
import { promisify } from 'node:util'

import pg from 'pg'

import { PostgresStore } from '../../../src/store/postgres/postgres-store.js'
import { feedReader } from '../../events/feed-fixtures.js'
import { openSse } from '../../events/sse-client.js'
import { readRepoFile } from '../../helpers/markdown.js'
import { startCluster } from '../../helpers/pg-cluster.js'
import { freshDatabase, SKIP_POSTGRES } from '../../helpers/postgres.js'
import { makeTempDir, startService, type TestService } from '../../helpers/service.js'

/**
 * The backup and restore of docs/postgresql.md, word for word, from one PostgreSQL cluster to a
 * second one: a consumer that saved its cursor before the dump resumes with it on the restored
 * database and reads every event written there; new writes succeed, numbered above the old head.
 */

const run = promisify(execFile)

interface FeedItem {
  id: string
  type: string
  userId: string
}

interface Page {
  items: FeedItem[]
  nextCursor: string
}

/** The shell block of the docs that holds the pg_dump and pg_restore commands, as written. */
function documentedProcedure(): string {
  const text = readRepoFile('docs/postgresql.md')
  const blocks = [...text.matchAll(/^( *)```sh\n([\s\S]*?)^\1```$/gm)].map((match) =>
    (match[2] ?? '')
      .split('\n')
      .map((line) => line.slice((match[1] ?? '').length))
      .join('\n'),
  )
  const found = blocks.filter((block) => /\bpg_dump\b/.test(block) && /\bpg_restore\b/.test(block))
  assert.equal(found.length, 1, 'one block of docs/postgresql.md holds pg_dump and pg_restore')
  return found[0] ?? ''
}

/** Runs the documented dump and restore from `oldUrl` into a database of a second cluster; its URL. */
async function restoreOnSecondCluster(
  t: TestContext,
  procedure: string,
  oldUrl: string,
): Promise<string> {
  const second = await startCluster(t)
  const newUrl = await second.createDatabase('restored')
  await run('bash', ['-euo', 'pipefail', '-c', procedure], {
    cwd: await makeTempDir(t, 'restore-'),
    env: { ...process.env, DATABASE_URL: oldUrl, NEW_DATABASE_URL: newUrl },
  })
  return newUrl
}

async function serviceOn(t: TestContext, url: string): Promise<TestService> {
  const store = new PostgresStore({ url })
  t.after(() => store.close())
  return startService(t, { store })
}

async function feed(svc: TestService, after?: string): Promise<Page> {
  const res = await svc.call(
    'GET',
    `/events?limit=1000${after === undefined ? '' : `&after=${after}`}`,
    {
      token: feedReader,
    },
  )
  assert.equal(res.status, 200, res.text)
  return res.json<Page>()
}

/**
 * Transaction ids the old server used before: a server that has run a while is far ahead of a
 * new one, whose transaction ids start near 750.
 */
async function age(url: string, transactions: number): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    for (let i = 0; i < transactions; i += 1) await client.query('SELECT pg_current_xact_id()')
  } finally {
    await client.end()
  }
}

describe('backup and restore on PostgreSQL, as docs/postgresql.md says', {
  skip: SKIP_POSTGRES,
}, () => {
  it('restores onto a second cluster: saved cursors stay valid, a consumer resumes and sees every new event, new writes succeed above the old head', {
    timeout: 180_000,
  }, async (t) => {
    const procedure = documentedProcedure()
    const oldUrl = await freshDatabase(t)
    await age(oldUrl, 3000)
    const old = await serviceOn(t, oldUrl)
    const before = [await old.createUser(), await old.createUser(), await old.createUser()]
    const renamed = await old.call('PATCH', `/users/${before[0]?.id}`, {
      json: { name: 'Renamed' },
      contentType: 'application/merge-patch+json',
    })
    assert.equal(renamed.status, 200, renamed.text)
    const deleted = await old.call('DELETE', `/users/${before[2]?.id}`)
    assert.equal(deleted.status, 204, deleted.text)
    const saved = await feed(old)
    assert.equal(saved.items.length, 5)

    const newUrl = await restoreOnSecondCluster(t, procedure, oldUrl)

    const restored = await serviceOn(t, newUrl)
    // The restored service's open raised the counter to its clock's floor: the feed's head, where
    // the pages send a consumer on, is past the saved cursor, with no event between them.
    const whole = await feed(restored)
    assert.deepEqual(whole.items, saved.items, 'the restored feed, ids and all')
    assert.ok(whole.nextCursor >= saved.nextCursor, whole.nextCursor)
    const empty = await feed(restored, saved.nextCursor)
    assert.deepEqual(empty.items, [])
    assert.ok(empty.nextCursor >= saved.nextCursor, empty.nextCursor)
    const stream = await openSse(`${restored.baseUrl}/events`, feedReader, {
      'last-event-id': saved.nextCursor,
    })
    t.after(() => {
      stream.close()
    })
    assert.equal(stream.status, 200)
    const after = []
    for (let i = 0; i < 5; i += 1) after.push(await restored.createUser())
    const gone = await restored.call('DELETE', `/users/${before[1]?.id}`)
    assert.equal(gone.status, 204, gone.text)
    const resumed = await feed(restored, saved.nextCursor)
    assert.deepEqual(
      resumed.items.map((item) => [item.type, item.userId]),
      [...after.map((user) => ['user.created', user.id]), ['user.deleted', before[1]?.id]],
      'every event written after the restore, in order, after the saved cursor',
    )
    for (const item of resumed.items) assert.ok(item.id > saved.nextCursor, item.id)
    await stream.waitFor(6, 5000)
    assert.deepEqual(
      stream.events.map((event) => event.id),
      resumed.items.map((item) => item.id),
      'the stream resumed with Last-Event-ID sees the same',
    )
    const all = await feed(restored)
    assert.deepEqual(all.items.slice(0, 5), saved.items, 'the old events keep their ids')
    assert.equal(all.items.length, 11)
  })

  it('restores a dump older than what a consumer read: the new events are numbered above every id handed out before, none reused', {
    timeout: 180_000,
  }, async (t) => {
    const procedure = documentedProcedure()
    const oldUrl = await freshDatabase(t)
    const old = await serviceOn(t, oldUrl)
    const kept = await old.createUser()
    const newUrl = await restoreOnSecondCluster(t, procedure, oldUrl)
    // After the dump, the old server takes changes a consumer reads, then it is lost.
    const lost = [await old.createUser(), await old.createUser()]
    const seen = await feed(old)
    assert.deepEqual(
      seen.items.map((item) => item.userId),
      [kept.id, ...lost.map((user) => user.id)],
    )

    const restored = await serviceOn(t, newUrl)
    const made = [await restored.createUser(), await restored.createUser()]
    const resumed = await feed(restored, seen.nextCursor)
    assert.deepEqual(
      resumed.items.map((item) => [item.type, item.userId]),
      made.map((user) => ['user.created', user.id]),
      'the consumer resuming from its saved cursor sees every event written after the restore',
    )
    const seenIds = new Set(seen.items.map((item) => item.id))
    for (const item of resumed.items) {
      assert.ok(!seenIds.has(item.id), `${item.id} was handed out before the restore`)
      assert.ok(item.id > seen.nextCursor, item.id)
    }
    const whole = await feed(restored)
    assert.deepEqual(
      whole.items.map((item) => item.id),
      [seen.items[0]?.id, ...resumed.items.map((item) => item.id)],
      'the dump keeps its event and its id; the lost ones are gone',
    )
  })

  // The documented order is restore, then start; an operator who restores under running replicas
  // must not get reused ids either: a consumer's cursor would pass over the new events.
  it('restored under a running replica: its next events are numbered above every id it saw, none reused', {
    timeout: 60_000,
  }, async (t) => {
    const url = await freshDatabase(t)
    const store = new PostgresStore({ url, eventPollMs: 50 })
    t.after(() => store.close())
    const svc = await startService(t, { store })
    const kept = await svc.createUser()
    const dumped = await feed(svc)
    const lost = [await svc.createUser(), await svc.createUser()]
    const seen = await feed(svc)
    assert.equal(seen.items.length, 3)
    const newest = BigInt(`0x${seen.nextCursor}`)
    const deadline = Date.now() + 10_000
    while (store.events.seenHead < newest && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    assert.equal(store.events.seenHead, newest, 'the follower saw the newest event')

    // What a restore of a dump taken after the first user leaves: its events, its counter.
    const db = new pg.Client({ connectionString: url })
    await db.connect()
    const at = BigInt(`0x${dumped.nextCursor}`).toString()
    await db.query('DELETE FROM events WHERE id > $1', [at])
    await db.query('DELETE FROM users WHERE id = ANY($1)', [lost.map((user) => user.id)])
    await db.query('UPDATE event_counter SET last_id = $1', [at])
    await db.end()

    const made = await svc.createUser()
    const resumed = await feed(svc, seen.nextCursor)
    assert.deepEqual(
      resumed.items.map((item) => item.userId),
      [made.id],
      'the consumer resuming from its saved cursor sees the event written after the restore',
    )
    const seenIds = new Set(seen.items.map((item) => item.id))
    assert.ok(!seenIds.has(resumed.items[0]?.id ?? ''))
    assert.deepEqual(
      (await feed(svc)).items.map((item) => item.userId),
      [kept.id, made.id],
    )
  })
})
