import assert from 'node:assert/strict'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { type ChildOptions, type RunningChild, startChild } from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { freshSchema, replicaStore, SKIP_POSTGRES } from '../helpers/postgres.js'
import { startService, uniqueEmail } from '../helpers/service.js'
import { makeWorld } from '../helpers/tmpfs-world.js'
import { makeToken } from '../helpers/tokens.js'
import { revertPastCheckpoint } from '../helpers/wal-disk.js'
import {
  ADMIN,
  type EndpointWithSecret,
  type HookService,
  STORES,
  type StoreCase,
  startHooks,
} from '../helpers/webhook-api.js'
import {
  eventually,
  type Received,
  startReceiver,
  verifyDelivery,
} from '../helpers/webhook-receivers.js'

const LOCAL = { webhookAllowNetworks: ['127.0.0.0/8'] }
const FEED = makeToken({ scope: 'events:read' })
const FILE_STORE: StoreCase = { name: 'file', skip: false, make: () => ({}) }

interface FeedEvent {
  id: string
  type: string
}

const idOf = (received: Received): string => String(received.headers['webhook-id'])

interface LogEntry {
  attempt: number
  result: string
  responseStatus: number
  error: string | null
}

/**
 * The endpoint's delivery log once it holds `count` attempts: the receiver has answered, and the
 * service logs an attempt once it has read that answer.
 */
async function deliveryLog(s: HookService, id: string, count: number): Promise<LogEntry[]> {
  let items: LogEntry[] = []
  await eventually(async () => {
    const log = await s.hooks('GET', `/${id}/deliveries`)
    items = log.json<{ items: LogEntry[] }>().items
    return items.length === count
  })
  return items
}

for (const store of STORES) {
  describe(`webhooks delivered by the service on the ${store.name} store`, {
    skip: store.skip,
  }, () => {
    it('every change after the endpoint was made arrives once, in order, signed, as the feed shows it', async (t) => {
      const receiver = await startReceiver()
      t.after(() => receiver.close())
      const s = await startHooks(t, store, LOCAL)
      const before = await s.createUser()
      const hook = await s.createHook({ url: `${receiver.url}/hooks` })
      const user = await s.createUser()
      const patched = await s.call('PATCH', `/users/${user.id}`, { json: { name: 'Changed' } })
      assert.equal(patched.status, 200, patched.text)
      assert.equal((await s.call('DELETE', `/users/${before.id}`)).status, 204)
      const received = await receiver.waitFor(3)
      const feed = await s.call('GET', '/events?limit=100', { token: FEED })
      const events = feed.json<{ items: FeedEvent[] }>().items
      const after = events.slice(1)
      assert.deepEqual(
        received.map(idOf),
        after.map((event) => `msg_${event.id}`),
      )
      for (const [index, delivery] of received.entries()) {
        const payload = verifyDelivery(hook.secret, delivery) as { type: string; data: unknown }
        assert.equal(payload.type, after[index]?.type)
        assert.deepEqual(payload.data, after[index])
      }
      await eventually(async () => {
        const cursor = await s.hooks('GET', `/${hook.id}/cursor`)
        return cursor.json<{ after: string }>().after === after.at(-1)?.id
      })
      const log = await s.hooks('GET', `/${hook.id}/deliveries`)
      const items = log.json<{ items: { result: string; eventId: string }[] }>().items
      assert.deepEqual(
        items.map((entry) => [entry.eventId, entry.result]),
        after.map((event) => [event.id, 'succeeded']).reverse(),
      )
    })

    it('a receiver that fails then recovers gets the event again with the same webhook-id', async (t) => {
      let failures = 1
      const receiver = await startReceiver((_request, res) => {
        if (failures > 0) {
          failures -= 1
          res.writeHead(500).end('down')
        } else res.writeHead(200).end()
      })
      t.after(() => receiver.close())
      const s = await startHooks(t, store, { ...LOCAL, webhookRetrySchedule: [50] })
      const hook = await s.createHook({ url: receiver.url })
      await s.createUser()
      const [first, second] = await receiver.waitFor(2)
      assert.ok(first !== undefined && second !== undefined)
      assert.equal(idOf(first), idOf(second))
      assert.equal(first.body.toString(), second.body.toString())
      const items = await deliveryLog(s, hook.id, 2)
      assert.deepEqual(
        items.map((entry) => [entry.attempt, entry.result, entry.responseStatus]),
        [
          [2, 'succeeded', 200],
          [1, 'failed', 500],
        ],
      )
    })

    it('a 101 Switching Protocols answer fails the attempt with its status, and the retry comes', async (t) => {
      let upgrades = 1
      const receiver = await startReceiver((_request, res) => {
        if (upgrades > 0) {
          upgrades -= 1
          // A WebSocket server, say: 101 is not a 2xx, and the connection is not Node's to keep.
          res.writeHead(101, { connection: 'upgrade', upgrade: 'websocket' }).end()
        } else res.writeHead(200).end()
      })
      t.after(() => receiver.close())
      const s = await startHooks(t, store, { ...LOCAL, webhookRetrySchedule: [50] })
      const hook = await s.createHook({ url: receiver.url })
      await s.createUser()
      await receiver.waitFor(2)
      const items = await deliveryLog(s, hook.id, 2)
      assert.deepEqual(
        items.map((entry) => [entry.attempt, entry.result, entry.responseStatus, entry.error]),
        [
          [2, 'succeeded', 200, null],
          [1, 'failed', 101, 'status'],
        ],
      )
    })
  })
}

describe('webhook addresses checked at each attempt', () => {
  it('an endpoint made while its network was allowed fails with private_address once it is not, and nothing is sent', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const first = await startHooks(t, FILE_STORE, LOCAL)
    const hook = await first.createHook({ url: receiver.url })
    await first.service.close()
    const s = await startHooks(t, FILE_STORE, {
      dataDir: first.dataDir,
      webhookRetrySchedule: [60_000],
    })
    await s.createUser()
    await eventually(async () => {
      const log = await s.hooks('GET', `/${hook.id}/deliveries`)
      return log.json<{ items: unknown[] }>().items.length === 1
    })
    const log = await s.hooks('GET', `/${hook.id}/deliveries`)
    const [entry] = log.json<{ items: { result: string; error: string; responseStatus: null }[] }>()
      .items
    assert.deepEqual(
      [entry?.result, entry?.error, entry?.responseStatus],
      ['failed', 'private_address', null],
    )
    assert.equal(receiver.received.length, 0)
  })
})

describe('webhooks across a SIGKILL and a power cut of the file-store service', () => {
  it('deliveries resume after the restart: every acknowledged change arrives, none is skipped', {
    timeout: 60_000,
  }, async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const { dataDir, later } = await makeWorld(t, 'webhooks-kill-')
    const options: ChildOptions = { dataDir, env: { WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8' } }
    const start = async (): Promise<RunningChild> => {
      const child = await startChild(options)
      later(() => child.stop('SIGKILL'))
      return child
    }
    const token = makeToken()
    const child = await start()
    const created = await request('POST', `${child.url}/webhooks`, {
      token: ADMIN,
      json: { url: `${receiver.url}/in` },
    })
    assert.equal(created.status, 201, created.text)
    const hook = created.json<EndpointWithSecret>()
    const cursorAtCreation = readFileSync(
      path.join(dataDir, 'webhooks', `${hook.id}.cursor`),
      'utf8',
    )
    const ids: string[] = []
    for (let i = 0; i < 20; i += 1) {
      const res = await request('POST', `${child.url}/users`, {
        token,
        json: { email: uniqueEmail('kill'), name: `User ${i}` },
      })
      assert.equal(res.status, 201, res.text)
      ids.push(res.json<User>().id)
    }
    await child.stop('SIGKILL')
    // A power cut as well: user files renamed since the checkpoint were never synced, and no
    // cursor save of the deliveries survived (the endpoint's cursor is back where it started).
    revertPastCheckpoint(dataDir)
    const cursorFile = path.join(dataDir, 'webhooks', `${hook.id}.cursor`)
    writeFileSync(cursorFile, cursorAtCreation)
    const restarted = await start()
    for (let i = 0; i < 5; i += 1) {
      const res = await request('POST', `${restarted.url}/users`, {
        token,
        json: { email: uniqueEmail('after'), name: `After ${i}` },
      })
      assert.equal(res.status, 201, res.text)
    }
    const feed = await request('GET', `${restarted.url}/events?limit=100`, { token: FEED })
    const events = feed.json<{ items: FeedEvent[] }>().items
    assert.equal(events.length, 25)
    await eventually(() => {
      const seen = new Set(receiver.received.map(idOf))
      return events.every((event) => seen.has(`msg_${event.id}`))
    }, 20_000)
    // At least once, in order: the first delivery of each event comes in feed order.
    const firsts: string[] = []
    for (const delivery of receiver.received) {
      if (!firsts.includes(idOf(delivery))) firsts.push(idOf(delivery))
      verifyDelivery(hook.secret, delivery)
    }
    assert.deepEqual(
      firsts,
      events.map((event) => `msg_${event.id}`),
    )
  })
})

describe('webhooks on two PostgreSQL replicas', { skip: SKIP_POSTGRES }, () => {
  it('one attempt per request received: each event is delivered once, by one replica', {
    timeout: 60_000,
  }, async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const schema = freshSchema(t)
    const replica = () => startService(t, { store: replicaStore(t, schema), ...LOCAL })
    const a = await replica()
    const b = await replica()
    const created = await a.call('POST', '/webhooks', { token: ADMIN, json: { url: receiver.url } })
    assert.equal(created.status, 201, created.text)
    const hook = created.json<EndpointWithSecret>()
    for (let i = 0; i < 10; i += 1) {
      const s = i % 2 === 0 ? a : b
      await s.createUser()
    }
    const events = (await a.call('GET', '/events?limit=100', { token: FEED })).json<{
      items: FeedEvent[]
    }>().items
    await receiver.waitFor(10, 15_000)
    await new Promise((resolve) => setTimeout(resolve, 500))
    assert.deepEqual(
      receiver.received.map(idOf),
      events.map((event) => `msg_${event.id}`),
    )
    // An attempt's entry is written after its answer came: the last one may still be on its way.
    const logged = async (): Promise<number> => {
      const log = await b.call('GET', `/webhooks/${hook.id}/deliveries?limit=100`, { token: ADMIN })
      return log.json<{ items: unknown[] }>().items.length
    }
    await eventually(async () => (await logged()) >= receiver.received.length)
    assert.equal(await logged(), receiver.received.length)
  })
})
