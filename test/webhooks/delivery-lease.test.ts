import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import { silentLogger } from '../../src/log/logger.js'
import type { MemoryStore } from '../../src/store/memory-store.js'
import type { WebhookStore } from '../../src/store/webhook-store.js'
import { createWebhookDelivery, type WebhookDelivery } from '../../src/webhooks/delivery.js'
import { startDeliveryWorld } from '../helpers/webhook-delivery-world.js'
import { eventually, startReceiver } from '../helpers/webhook-receivers.js'

/**
 * The endpoints of a store with leases as a shared database keeps them: one holder at a time
 * until its lease runs out (the memory store, which one process opens, grants every lease).
 */
function withExclusiveLeases(webhooks: WebhookStore) {
  const leases = new Map<string, { holder: string; until: number }>()
  const store: WebhookStore = {
    list: () => webhooks.list(),
    get: (id) => webhooks.get(id),
    create: (hook, cursor, max) => webhooks.create(hook, cursor, max),
    update: (id, change) => webhooks.update(id, change),
    delete: (id) => webhooks.delete(id),
    cursor: (id) => webhooks.cursor(id),
    setCursor: (id, after) => webhooks.setCursor(id, after),
    advanceCursor: (id, from, to) => webhooks.advanceCursor(id, from, to),
    logAttempt: (id, attempt) => webhooks.logAttempt(id, attempt),
    attempts: (id, limit, before) => webhooks.attempts(id, limit, before),
    async lease(id, holder, ms) {
      const now = Date.now()
      const current = leases.get(id)
      if (current !== undefined && current.holder !== holder && current.until > now) return false
      leases.set(id, { holder, until: now + ms })
      return true
    },
    async releaseLease(id, holder) {
      if (leases.get(id)?.holder === holder) leases.delete(id)
    },
  }
  return { store, leases }
}

function replica(
  t: TestContext,
  store: MemoryStore,
  webhooks: WebhookStore,
  holder: string,
  webhookRetrySchedule = [100],
): WebhookDelivery {
  const delivery = createWebhookDelivery({
    store: { events: store.events, webhooks },
    logger: silentLogger,
    now: Date.now,
    paused: () => false,
    holder,
    webhookTimeoutMs: 2000,
    webhookRetrySchedule,
    webhookAllowNetworks: ['127.0.0.0/8'],
    timings: { leaseMs: 1000, renewMs: 300, pollMs: 50, refreshMs: 100 },
  })
  t.after(() => delivery.close())
  delivery.start()
  return delivery
}

describe('webhook delivery across processes (a lease per endpoint)', () => {
  it('makes each attempt from one process only, in order', async (t) => {
    const receiver = await startReceiver((_, res) => setTimeout(() => res.writeHead(200).end(), 5))
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { paused: () => true })
    const { store: webhooks } = withExclusiveLeases(world.store.webhooks)
    const store = world.store as MemoryStore
    replica(t, store, webhooks, 'a')
    replica(t, store, webhooks, 'b')
    await world.register(receiver.url)
    const ids: string[] = []
    for (let i = 0; i < 20; i += 1) ids.push(await world.write())
    await receiver.waitFor(20)
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.deepEqual(
      receiver.received.map((request) => request.headers['webhook-id']),
      ids.map((id) => `msg_${id}`),
    )
  })

  it('is taken over by another process once the holder dies and its lease runs out', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { paused: () => true })
    const { store: webhooks, leases } = withExclusiveLeases(world.store.webhooks)
    const store = world.store as MemoryStore
    const first = replica(t, store, webhooks, 'a')
    const hook = await world.register(receiver.url)
    first.changed(hook.endpoint.id)
    const delivered = await world.write()
    await receiver.waitFor(1)
    await eventually(async () => (await webhooks.cursor(hook.endpoint.id)) === delivered)
    assert.equal(leases.get(hook.endpoint.id)?.holder, 'a')
    // A holder that dies gives nothing back: its lease stays until it runs out.
    const held = leases.get(hook.endpoint.id)
    await first.close()
    if (held !== undefined) leases.set(hook.endpoint.id, { holder: 'a', until: Date.now() + 1000 })
    replica(t, store, webhooks, 'b')
    const died = Date.now()
    const id = await world.write()
    const [, taken] = await receiver.waitFor(2, 5000)
    assert.equal(taken?.headers['webhook-id'], `msg_${id}`)
    const after = (taken?.at ?? 0) - died
    assert.ok(after >= 900 && after < 2000, `taken over after ${after} ms`)
    assert.equal(leases.get(hook.endpoint.id)?.holder, 'b')
  })

  it('goes on from a cursor a client moved on another replica while the holder waited to retry', async (t) => {
    const receiver = await startReceiver((request, res) => {
      res.writeHead(request.headers['webhook-id'] === `msg_${failing}` ? 500 : 200).end()
    })
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { paused: () => true })
    const { store: webhooks, leases } = withExclusiveLeases(world.store.webhooks)
    const store = world.store as MemoryStore
    const hour = [3_600_000]
    replica(t, store, webhooks, 'a', hour)
    replica(t, store, webhooks, 'b', hour)
    const hook = await world.register(receiver.url)
    const failing = await world.write()
    await receiver.waitFor(1)
    // The holder now waits an hour to retry. A client skips the event through a third replica,
    // which tells neither of these two.
    const id = hook.endpoint.id
    const holder = leases.get(id)?.holder
    await webhooks.setCursor(id, failing)
    const next = await world.write()
    const [, delivered] = await receiver.waitFor(2, 3000)
    assert.equal(delivered?.headers['webhook-id'], `msg_${next}`)
    await eventually(async () => (await webhooks.cursor(id)) === next)
    assert.equal(leases.get(id)?.holder, holder)
  })

  it('abandons the attempt in flight once its lease may have run out unrenewed: one request at a time', async (t) => {
    let inFlight = 0
    let most = 0
    const receiver = await startReceiver((_, res) => {
      inFlight += 1
      most = Math.max(most, inFlight)
      res.on('close', () => {
        inFlight -= 1
      })
      setTimeout(() => {
        if (!res.destroyed) res.writeHead(200).end()
      }, 1500)
    })
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { paused: () => true })
    const { store: shared } = withExclusiveLeases(world.store.webhooks)
    const store = world.store as MemoryStore
    // Replica a's view of the database, which a partition can cut off: every call then fails.
    let cut = false
    const reachable = Object.fromEntries(
      Object.entries(shared).map(([name, call]: [string, (...args: unknown[]) => unknown]) => [
        name,
        (...args: unknown[]) =>
          cut ? Promise.reject(new Error('the database does not answer')) : call(...args),
      ]),
    ) as unknown as WebhookStore
    const first = replica(t, store, reachable, 'a')
    const hook = await world.register(receiver.url)
    first.changed(hook.endpoint.id)
    await world.write()
    await receiver.waitFor(1)
    cut = true
    replica(t, store, shared, 'b')
    // b takes the lease once a's runs out, and sends the event again: a has abandoned its attempt.
    await receiver.waitFor(2, 5000)
    assert.equal(most, 1, 'two requests to the endpoint were in flight at once')
  })
})
