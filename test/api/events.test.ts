import assert from 'node:assert/strict'
import { readdir } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import { FileStore } from '../../src/store/file/file-store.js'
import { assertProblem } from '../helpers/http.js'
import { makeTempDir, startService, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

interface FeedEvent {
  id: string
  type: string
  time: string
  userId: string
  version: number
  actor?: string
  requestId?: string
  changed?: string[]
  user?: { id: string; version: number; status: string; email: string }
}

interface FeedPage {
  items: FeedEvent[]
  nextCursor: string
}

const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })
const writer = makeToken({ sub: 'admin-7', scope: 'users:read users:write users:admin' })

async function readFeed(
  call: (
    m: string,
    t: string,
    o?: object,
  ) => Promise<{ status: number; text: string; json<T>(): T }>,
  query = '',
): Promise<FeedPage> {
  const res = await call('GET', `/events${query}`, { token: reader })
  assert.equal(res.status, 200, res.text)
  return res.json<FeedPage>()
}

describe('GET /events', () => {
  it('appends exactly one event per change, with its type, actor, request id and changed fields', async (t) => {
    const svc = await startService(t)
    const email = uniqueEmail()
    const created = await svc.call('POST', '/users', {
      token: writer,
      json: { email, name: 'Ann' },
      headers: { 'x-request-id': 'req-create' },
    })
    assert.equal(created.status, 201)
    const id = created.json<{ id: string }>().id
    const patched = await svc.call('PATCH', `/users/${id}`, {
      token: writer,
      json: { name: 'Ann B', metadata: { a: '1' } },
      contentType: 'application/merge-patch+json',
    })
    assert.equal(patched.status, 200, patched.text)
    // A repeat that changes nothing appends nothing, nor does an empty PATCH.
    assert.equal(
      (
        await svc.call('PATCH', `/users/${id}`, {
          token: writer,
          json: { name: 'Ann B' },
          contentType: 'application/merge-patch+json',
        })
      ).status,
      200,
    )
    assert.equal(
      (
        await svc.call('PATCH', `/users/${id}`, {
          token: writer,
          json: {},
          contentType: 'application/merge-patch+json',
        })
      ).status,
      200,
    )
    assert.equal((await svc.call('POST', `/users/${id}:activate`, { token: writer })).status, 200)
    assert.equal((await svc.call('POST', `/users/${id}:suspend`, { token: writer })).status, 200)
    assert.equal(
      (
        await svc.call('DELETE', `/users/${id}`, {
          token: writer,
          headers: { 'x-request-id': 'req-delete' },
        })
      ).status,
      204,
    )
    // A refused write appends nothing.
    assert.equal(
      (
        await svc.call('PATCH', `/users/${id}`, {
          token: writer,
          json: { name: 'x' },
          contentType: 'application/merge-patch+json',
        })
      ).status,
      404,
    )

    const page = await readFeed(svc.call)
    assert.deepEqual(
      page.items.map((event) => event.type),
      ['user.created', 'user.updated', 'user.activated', 'user.suspended', 'user.deleted'],
    )
    assert.deepEqual(
      page.items.map((event) => event.version),
      [1, 2, 3, 4, 5],
    )
    for (const event of page.items) {
      assert.match(event.id, /^[0-9a-f]{16}$/)
      assert.equal(event.userId, id)
      assert.equal(event.actor, 'admin-7')
      assert.ok(event.requestId !== undefined && event.requestId !== '')
      assert.ok(!Number.isNaN(Date.parse(event.time)))
    }
    const ids = page.items.map((event) => event.id)
    assert.deepEqual([...ids].sort(), ids)
    assert.equal(new Set(ids).size, ids.length)
    const [first, update, , suspended, deleted] = page.items
    assert.equal(first?.requestId, 'req-create')
    assert.equal(first?.user?.email, email)
    assert.equal(first?.user?.version, 1)
    assert.deepEqual(update?.changed, ['name', 'metadata'])
    assert.equal(suspended?.user?.status, 'suspended')
    assert.equal(deleted?.requestId, 'req-delete')
    assert.equal(deleted?.user, undefined, 'a deletion carries no personal data')
    assert.doesNotMatch(JSON.stringify(deleted), new RegExp(email.replace(/[.]/g, '\\.')))
    assert.equal(page.nextCursor, ids.at(-1))
    // The events are on disk, in the segment log.
    const segments = await readdir(path.join(svc.dataDir, 'events'))
    assert.ok(
      segments.some((name) => /^[0-9a-f]{16}\.ndjson$/.test(name)),
      String(segments),
    )
  })

  it('pages oldest first with limit and after, filters by type and userId, and always gives a cursor', async (t) => {
    const svc = await startService(t)
    const a = await svc.createUser()
    const b = await svc.createUser()
    assert.equal((await svc.call('POST', `/users/${a.id}:activate`)).status, 200)
    const empty = await readFeed(svc.call, '?type=user.deleted')
    assert.deepEqual(empty.items, [])
    assert.match(empty.nextCursor, /^[0-9a-f]{16}$/)
    const one = await readFeed(svc.call, '?limit=1')
    assert.equal(one.items.length, 1)
    assert.equal(one.items[0]?.userId, a.id)
    const rest = await readFeed(svc.call, `?after=${one.nextCursor}&limit=1000`)
    assert.deepEqual(
      rest.items.map((event) => [event.userId, event.type]),
      [
        [b.id, 'user.created'],
        [a.id, 'user.activated'],
      ],
    )
    const end = await readFeed(svc.call, `?after=${rest.nextCursor}`)
    assert.deepEqual(end.items, [])
    assert.equal(end.nextCursor, rest.nextCursor, 'an empty page resumes where it was asked')
    const ofA = await readFeed(svc.call, `?userId=${a.id}`)
    assert.deepEqual(
      ofA.items.map((event) => event.type),
      ['user.created', 'user.activated'],
    )
    const created = await readFeed(svc.call, '?type=user.created,user.deleted')
    assert.deepEqual(
      created.items.map((event) => event.userId),
      [a.id, b.id],
    )
    const c = await svc.createUser()
    const after = await readFeed(svc.call, `?after=${end.nextCursor}`)
    assert.deepEqual(
      after.items.map((event) => event.userId),
      [c.id],
    )
  })

  it('answers 400 for unknown, repeated or malformed parameters', async (t) => {
    const svc = await startService(t)
    for (const query of [
      '?limit=0',
      '?limit=1001',
      '?limit=x',
      '?after=12',
      '?after=ZZZZZZZZZZZZZZZZ',
      '?type=user.renamed',
      '?userId=nope',
      '?foo=1',
      '?limit=1&limit=2',
      '?after=',
    ]) {
      const res = await svc.call('GET', `/events${query}`, { token: reader })
      assertProblem(res, 400, 'bad_request')
    }
  })

  it('answers 403 insufficient_scope without events:read, even with every users scope', async (t) => {
    const svc = await startService(t)
    const res = await svc.call('GET', '/events')
    assertProblem(res, 403, 'insufficient_scope')
    assert.match(res.headers.get('www-authenticate') ?? '', /scope="events:read"/)
    assertProblem(await svc.call('GET', '/events', { token: undefined }), 401, 'token_missing')
  })

  it('answers 410 cursor_expired for a cursor older than the retained feed', async (t) => {
    let clock = Date.now()
    const dir = path.join(
      await import('node:os').then((os) => os.tmpdir()),
      `events-410-${process.pid}-${Date.now()}`,
    )
    t.after(async () => {
      await (await import('node:fs/promises')).rm(dir, { recursive: true, force: true })
    })
    const store = new FileStore({ dataDir: dir, now: () => clock, eventsRetentionDays: 30 })
    const svc = await startService(t, { store })
    const old = await svc.createUser()
    const first = await readFeed(svc.call)
    assert.equal(first.items.length, 1)
    clock += 31 * 86_400_000
    const fresh = await svc.createUser()
    await store.pruneEvents()
    const expired = await svc.call('GET', `/events?after=${'0'.repeat(16)}`, { token: reader })
    assertProblem(expired, 410, 'cursor_expired')
    const retained = await readFeed(svc.call)
    assert.deepEqual(
      retained.items.map((event) => event.userId),
      [fresh.id],
    )
    assert.notEqual(old.id, fresh.id)
    // The cursor of the last pruned event is still good: nothing after it was missed.
    assert.equal(
      (await svc.call('GET', `/events?after=${first.nextCursor}`, { token: reader })).status,
      200,
    )
  })

  it('keeps a cursor from before a restart good once the events before it are pruned (ids jump at a start)', async (t) => {
    let clock = Date.now()
    const dataDir = path.join(await makeTempDir(t), 'data')
    const open = (): FileStore =>
      new FileStore({ dataDir, now: () => clock, eventsRetentionDays: 30 })
    const before = await startService(t, { store: open() })
    await before.createUser()
    const seen = await readFeed(before.call)
    assert.equal(seen.items.length, 1)
    await before.service.close()

    clock += 60_000
    const reopened = open()
    const after = await startService(t, { store: reopened })
    // Past the log's segment age: the next event opens a segment of its own.
    clock += 2 * 3_600_000
    const fresh = await after.createUser()
    const [next] = (await readFeed(after.call)).items.slice(1)
    assert.ok(next !== undefined && BigInt(`0x${next.id}`) > BigInt(`0x${seen.nextCursor}`) + 1n)
    clock += 31 * 86_400_000
    await reopened.pruneEvents()
    assertProblem(
      await after.call('GET', `/events?after=${'0'.repeat(16)}`, { token: reader }),
      410,
      'cursor_expired',
    )
    // Nothing after the consumer's cursor was pruned: the ids between were never handed out.
    const resumed = await readFeed(after.call, `?after=${seen.nextCursor}`)
    assert.deepEqual(
      resumed.items.map((event) => [event.id, event.userId]),
      [[next.id, fresh.id]],
    )
  })

  it('starts a new segment an hour after the open one began, also when the service restarts more often', async (t) => {
    let clock = Date.now()
    const dataDir = path.join(await makeTempDir(t), 'data')
    const ids: string[] = []
    // A service restarted every 40 minutes, with one change each time.
    for (let round = 0; round < 4; round += 1) {
      const svc = await startService(t, {
        store: new FileStore({ dataDir, now: () => clock, eventsRetentionDays: 30 }),
      })
      ids.push((await svc.createUser()).id)
      await svc.service.close()
      clock += 40 * 60_000
    }
    const segments = await readdir(path.join(dataDir, 'events'))
    assert.ok(segments.length >= 2, `one segment per hour, not ${segments.join(', ')}`)
    clock += 30 * 86_400_000
    const store = new FileStore({ dataDir, now: () => clock, eventsRetentionDays: 30 })
    const svc = await startService(t, { store })
    await store.pruneEvents()
    const retained = (await readFeed(svc.call)).items.map((event) => event.userId)
    // The first hour's events are past the retention: they go, the newer ones stay.
    assert.ok(!retained.includes(ids[0] ?? ''), 'the oldest event was pruned')
    assert.ok(retained.includes(ids[3] ?? ''), 'the newest event was kept')
  })
})
