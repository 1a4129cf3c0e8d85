import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { eventJson } from '../../src/domain/event.js'
import type { StoredWebhook } from '../../src/domain/webhook.js'
import type { EventFeed, EventQuery } from '../../src/store/event-feed.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import type { Store } from '../../src/store/store.js'
import { READ_AHEAD_EVENTS } from '../../src/webhooks/read-ahead.js'
import { newSecret } from '../../src/webhooks/signature.js'
import { startDeliveryWorld } from '../helpers/webhook-delivery-world.js'
import {
  eventually,
  type Received,
  startRawServer,
  startReceiver,
  startSelfSignedReceiver,
  verifyDelivery,
} from '../helpers/webhook-receivers.js'

async function expectedBody(store: Store, eventId: string): Promise<string> {
  const before = (BigInt(`0x${eventId}`) - 1n).toString(16).padStart(16, '0')
  const [event] = (await store.events.read({ after: before, limit: 1 })).items
  assert.ok(event !== undefined && event.id === eventId)
  return `{"type":"${event.type}","timestamp":"${event.time}","data":${eventJson(event)}}`
}

const idOf = (request: Received | undefined): string => String(request?.headers['webhook-id'])

describe('webhook delivery: what is sent', () => {
  it('POSTs every event after the cursor, in order, signed, with the body of the feed', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t)
    const before = await world.write()
    const hook = await world.register(`${receiver.url}/hooks?x=1`)
    const ids = [await world.write(), await world.write(), await world.write()]
    const received = await receiver.waitFor(3)
    assert.deepEqual(
      received.map(idOf),
      ids.map((id) => `msg_${id}`),
    )
    assert.ok(!received.some((request) => idOf(request) === `msg_${before}`))
    for (const [index, request] of received.entries()) {
      assert.equal(request.path, '/hooks?x=1')
      assert.equal(request.headers['content-type'], 'application/json')
      assert.equal(request.body.toString(), await expectedBody(world.store, ids[index] ?? ''))
      const verified = verifyDelivery(hook.secret, request) as {
        type: string
        data: { id: string }
      }
      assert.equal(verified.type, 'user.created')
      assert.equal(verified.data.id, ids[index])
      const timestamp = Number(request.headers['webhook-timestamp'])
      assert.ok(Math.abs(timestamp - Date.now() / 1000) < 5)
    }
    await eventually(async () => (await world.store.webhooks.cursor(hook.endpoint.id)) === ids[2])
    const log = await world.store.webhooks.attempts(hook.endpoint.id, 10)
    assert.deepEqual(
      log.map((entry) => [
        entry.eventId,
        entry.attempt,
        entry.result,
        entry.responseStatus,
        entry.error,
      ]),
      [...ids].reverse().map((id) => [id, 1, 'succeeded', 204, null]),
    )
    assert.equal(log[0]?.webhookId, `msg_${ids[2]}`)
    assert.equal(log[0]?.eventType, 'user.created')
  })
})

describe('webhook delivery: the endpoint and its cursor', () => {
  it('passes over the events its eventTypes leave out, and moves the cursor past them', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t)
    const hook = await world.register(receiver.url, { eventTypes: ['user.deleted'] })
    const created = await world.write()
    await eventually(async () => (await world.store.webhooks.cursor(hook.endpoint.id)) === created)
    const user = (await world.store.list({ filter: {}, order: 'desc', limit: 1 })).items[0]?.user
    assert.ok(user !== undefined)
    await world.store.delete(user.id)
    const [request] = await receiver.waitFor(1)
    assert.equal(JSON.parse(String(request?.body)).type, 'user.deleted')
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal(receiver.received.length, 1)
  })

  it('replays from where a client moves the cursor, with the same ids and bodies', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t)
    const hook = await world.register(receiver.url)
    const start = await world.store.webhooks.cursor(hook.endpoint.id)
    const ids = [await world.write(), await world.write()]
    const first = (await receiver.waitFor(2)).map((request) => request.body.toString())
    assert.ok(start !== undefined)
    await world.store.webhooks.setCursor(hook.endpoint.id, start)
    world.delivery.changed(hook.endpoint.id)
    const again = (await receiver.waitFor(4)).slice(2)
    assert.deepEqual(
      again.map(idOf),
      ids.map((id) => `msg_${id}`),
    )
    assert.deepEqual(
      again.map((request) => request.body.toString()),
      first,
    )
  })

  it('keeps a cursor a client moves during an attempt: the success does not move it on', async (t) => {
    const receiver = await startReceiver((_, res) =>
      setTimeout(() => res.writeHead(200).end(), 300),
    )
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t)
    const hook = await world.register(receiver.url)
    const first = await world.write()
    await receiver.waitFor(1)
    const second = await world.write()
    // Skips the second event while the first is in flight.
    await world.store.webhooks.setCursor(hook.endpoint.id, second)
    world.delivery.changed(hook.endpoint.id)
    await eventually(
      async () => (await world.store.webhooks.attempts(hook.endpoint.id, 1)).length === 1,
    )
    await new Promise((resolve) => setTimeout(resolve, 400))
    assert.equal(await world.store.webhooks.cursor(hook.endpoint.id), second)
    assert.deepEqual(receiver.received.map(idOf), [`msg_${first}`])
  })

  it('delivers to an endpoint created after start, once told', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t)
    await world.write()
    await world.register(receiver.url)
    const id = await world.write()
    assert.equal(idOf((await receiver.waitFor(1))[0]), `msg_${id}`)
  })

  it('delivers to an endpoint created while a listing that cannot know it is under way', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const store = new MemoryStore()
    // The first listing reads the endpoints, then waits until the endpoint below was created.
    let created = (): void => undefined
    const createdNow = new Promise<void>((resolve) => {
      created = resolve
    })
    const list = store.webhooks.list.bind(store.webhooks)
    let listings = 0
    store.webhooks.list = async () => {
      listings += 1
      const hooks = await list()
      if (listings === 1) await createdNow
      return hooks
    }
    // No other listing for a minute: only the endpoint's own notice can start its delivery.
    const world = await startDeliveryWorld(t, {
      store,
      timings: { leaseMs: 2000, renewMs: 500, pollMs: 50, refreshMs: 60_000 },
    })
    await eventually(async () => listings === 1)
    await world.register(receiver.url)
    created()
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal(world.delivery.counts().endpointsEnabled, 1)
    const id = await world.write()
    assert.equal(idOf((await receiver.waitFor(1, 5000))[0]), `msg_${id}`)
    assert.equal(listings, 1)
  })
})

describe('webhook delivery: failures and retries', () => {
  it('retries a failed attempt after the schedule, with the same id and body, then moves on', async (t) => {
    let status = 500
    const receiver = await startReceiver((_, res) =>
      res.writeHead(status).end('{"error":"db down"}'),
    )
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [300, 300] })
    const hook = await world.register(receiver.url)
    const id = await world.write()
    await receiver.waitFor(1)
    assert.notEqual(await world.store.webhooks.cursor(hook.endpoint.id), id, 'no 2xx, no move')
    status = 200
    const [failed, retried] = await receiver.waitFor(2)
    assert.ok(failed !== undefined && retried !== undefined)
    assert.ok(retried.at - failed.at >= 290, `retried after ${retried.at - failed.at} ms`)
    assert.ok(retried.at - failed.at < 1000, `retried after ${retried.at - failed.at} ms`)
    assert.equal(idOf(retried), idOf(failed))
    assert.deepEqual(retried.body, failed.body)
    await eventually(async () => (await world.store.webhooks.cursor(hook.endpoint.id)) === id)
    const log = await world.store.webhooks.attempts(hook.endpoint.id, 10)
    assert.deepEqual(
      log.map((entry) => [
        entry.attempt,
        entry.result,
        entry.responseStatus,
        entry.error,
        entry.response,
      ]),
      [
        [2, 'succeeded', 200, null, '{"error":"db down"}'],
        [1, 'failed', 500, 'status', '{"error":"db down"}'],
      ],
    )
    const warned = world.lines.filter((line) => line.msg === 'webhook attempt failed')
    assert.equal(warned.length, 1)
    assert.deepEqual(
      { ...warned[0]?.fields },
      {
        endpointId: hook.endpoint.id,
        eventId: id,
        attempt: 1,
        error: 'status',
        responseStatus: 500,
      },
    )
    assert.ok(!JSON.stringify(world.lines).includes(hook.secret.slice(6)))
    assert.ok(!JSON.stringify(world.lines).includes(String(failed.headers['webhook-signature'])))
  })

  it('lengthens each delay by the jitter', async (t) => {
    const receiver = await startReceiver((_, res) => res.writeHead(503).end())
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [300], random: () => 0.999 })
    await world.register(receiver.url)
    await world.write()
    const [first, second] = await receiver.waitFor(2)
    assert.ok(first !== undefined && second !== undefined)
    assert.ok(second.at - first.at >= 320, `retried after ${second.at - first.at} ms`)
  })

  it("waits a 429's longer Retry-After instead of the schedule's delay", async (t) => {
    const receiver = await startReceiver((_, res) =>
      res.writeHead(429, { 'retry-after': '1' }).end(),
    )
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [50, 50] })
    await world.register(receiver.url)
    await world.write()
    const [first, second] = await receiver.waitFor(2)
    assert.ok(first !== undefined && second !== undefined)
    assert.ok(second.at - first.at >= 990, `retried after ${second.at - first.at} ms`)
  })

  it("waits a 503's Retry-After of 11 digits too (an hour), not the schedule's delay", async (t) => {
    const receiver = await startReceiver((_, res) =>
      res.writeHead(503, { 'retry-after': '99999999999' }).end(),
    )
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [50, 50] })
    await world.register(receiver.url)
    await world.write()
    await receiver.waitFor(1)
    await new Promise((resolve) => setTimeout(resolve, 500))
    assert.equal(receiver.received.length, 1, 'no retry after the 50 ms of the schedule')
  })

  it('disables the endpoint (failing) when the last attempt fails, its cursor before the event', async (t) => {
    const receiver = await startReceiver((_, res) => res.writeHead(500).end())
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [50, 50] })
    const hook = await world.register(receiver.url)
    const cursor = await world.store.webhooks.cursor(hook.endpoint.id)
    await world.write()
    await receiver.waitFor(3)
    await eventually(
      async () => (await world.store.webhooks.get(hook.endpoint.id))?.endpoint.enabled === false,
    )
    const stored = await world.store.webhooks.get(hook.endpoint.id)
    assert.equal(stored?.endpoint.disabledReason, 'failing')
    assert.equal(stored?.endpoint.version, 2)
    assert.ok(stored?.endpoint.disabledAt !== null)
    assert.equal(stored?.endpoint.updatedAt, stored?.endpoint.disabledAt)
    assert.equal(await world.store.webhooks.cursor(hook.endpoint.id), cursor)
    const disabled = world.lines.filter((line) => line.msg === 'webhook endpoint disabled')
    assert.deepEqual(
      disabled.map((line) => ({ ...line.fields, level: line.level })),
      [{ endpointId: hook.endpoint.id, reason: 'failing', level: 'warn' }],
    )
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.equal(receiver.received.length, 3, 'three attempts: the first and two retries')
  })

  it('disables the endpoint at once (gone) on a 410', async (t) => {
    const receiver = await startReceiver((_, res) => res.writeHead(410).end())
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [50, 50] })
    const hook = await world.register(receiver.url)
    await world.write()
    await eventually(
      async () => (await world.store.webhooks.get(hook.endpoint.id))?.endpoint.enabled === false,
    )
    assert.equal(
      (await world.store.webhooks.get(hook.endpoint.id))?.endpoint.disabledReason,
      'gone',
    )
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.equal(receiver.received.length, 1)
  })

  it('resumes a re-enabled endpoint at the event that failed, with a fresh schedule', async (t) => {
    let status = 500
    const receiver = await startReceiver((_, res) => res.writeHead(status).end())
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [50] })
    const hook = await world.register(receiver.url)
    const id = await world.write()
    await eventually(
      async () => (await world.store.webhooks.get(hook.endpoint.id))?.endpoint.enabled === false,
    )
    await world.write()
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.equal(receiver.received.length, 2, 'nothing goes to a disabled endpoint')
    await world.patch(hook.endpoint.id, { enabled: true, disabledReason: null, disabledAt: null })
    // Two failures again before the disabling: the schedule starts afresh.
    await receiver.waitFor(4)
    assert.deepEqual(
      receiver.received.map(idOf),
      [1, 2, 3, 4].map(() => `msg_${id}`),
    )
    await eventually(
      async () => (await world.store.webhooks.get(hook.endpoint.id))?.endpoint.enabled === false,
    )
    status = 200
    await world.patch(hook.endpoint.id, { enabled: true, disabledReason: null, disabledAt: null })
    await receiver.waitFor(6)
    await eventually(
      async () => (await world.store.webhooks.attempts(hook.endpoint.id, 10)).length === 6,
    )
    const log = await world.store.webhooks.attempts(hook.endpoint.id, 10)
    assert.deepEqual(
      log.map((entry) => [entry.eventId === id, entry.attempt, entry.result]),
      [
        [false, 1, 'succeeded'],
        [true, 5, 'succeeded'],
        [true, 4, 'failed'],
        [true, 3, 'failed'],
        [true, 2, 'failed'],
        [true, 1, 'failed'],
      ],
    )
  })

  it('keeps the schedule when the URL changes during a retry wait: the retry, when due, goes to the new URL', async (t) => {
    const failing = await startReceiver((_, res) => res.writeHead(500).end())
    const fixed = await startReceiver()
    t.after(() => Promise.all([failing.close(), fixed.close()]))
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [800] })
    const hook = await world.register(failing.url)
    const id = await world.write()
    const [first] = await failing.waitFor(1)
    await eventually(
      async () => (await world.store.webhooks.attempts(hook.endpoint.id, 1)).length === 1,
    )
    await world.patch(hook.endpoint.id, { url: fixed.url, description: 'moved' })
    const [request] = await fixed.waitFor(1, 3000)
    assert.equal(idOf(request), `msg_${id}`)
    const waited = (request?.at ?? 0) - (first?.at ?? 0)
    assert.ok(waited >= 780, `retried after ${waited} ms`)
  })

  it('keeps the schedule when the endpoint changes during an attempt: the failure counts', async (t) => {
    const slow = await startReceiver((_, res) => setTimeout(() => res.writeHead(500).end(), 300))
    const fixed = await startReceiver()
    t.after(() => Promise.all([slow.close(), fixed.close()]))
    // No listing meanwhile: the change is known from what the endpoint operations tell.
    const timings = { leaseMs: 2000, renewMs: 500, pollMs: 50, refreshMs: 60_000 }
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [800], timings })
    const hook = await world.register(slow.url)
    const id = await world.write()
    await slow.waitFor(1)
    await world.patch(hook.endpoint.id, { url: fixed.url })
    const changed = Date.now()
    const [request] = await fixed.waitFor(1, 3000)
    assert.equal(idOf(request), `msg_${id}`)
    // The failed attempt ends about 300 ms after it began, then the schedule's 800 ms.
    const waited = (request?.at ?? 0) - changed
    assert.ok(waited >= 700, `retried ${waited} ms after the change`)
    await eventually(
      async () => (await world.store.webhooks.attempts(hook.endpoint.id, 5)).length === 2,
    )
    const log = await world.store.webhooks.attempts(hook.endpoint.id, 5)
    assert.deepEqual(
      log.map((entry) => [entry.attempt, entry.result]),
      [
        [2, 'succeeded'],
        [1, 'failed'],
      ],
    )
  })

  it('does not disable an endpoint for a 410 from the URL a client changed it from during the attempt', async (t) => {
    const old = await startReceiver((_, res) => setTimeout(() => res.writeHead(410).end(), 300))
    const fixed = await startReceiver()
    t.after(() => Promise.all([old.close(), fixed.close()]))
    const timings = { leaseMs: 2000, renewMs: 500, pollMs: 50, refreshMs: 60_000 }
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [200], timings })
    const hook = await world.register(old.url)
    const id = await world.write()
    await old.waitFor(1)
    await world.patch(hook.endpoint.id, { url: fixed.url })
    const [request] = await fixed.waitFor(1, 3000)
    assert.equal(idOf(request), `msg_${id}`)
    const stored = await world.store.webhooks.get(hook.endpoint.id)
    assert.equal(stored?.endpoint.enabled, true)
    assert.equal(stored?.endpoint.disabledReason, null)
  })

  it('disables a failing endpoint on schedule although its description keeps changing', async (t) => {
    const receiver = await startReceiver((_, res) => res.writeHead(500).end())
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [300, 300] })
    const hook = await world.register(receiver.url)
    await world.write()
    let changes = 0
    const changing = setInterval(() => {
      changes += 1
      void world
        .patch(hook.endpoint.id, { description: `change ${changes}` })
        .catch(() => undefined)
    }, 100)
    t.after(() => clearInterval(changing))
    await eventually(
      async () => (await world.store.webhooks.get(hook.endpoint.id))?.endpoint.enabled === false,
      3000,
    )
    clearInterval(changing)
    assert.equal(
      (await world.store.webhooks.get(hook.endpoint.id))?.endpoint.disabledReason,
      'failing',
    )
    assert.equal(receiver.received.length, 3)
  })

  it('keeps the retry schedule across a restart of delivery, from the log', async (t) => {
    const receiver = await startReceiver((_, res) => res.writeHead(500).end())
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [400, 400] })
    const hook = await world.register(receiver.url)
    await world.write()
    await receiver.waitFor(1)
    await eventually(
      async () => (await world.store.webhooks.attempts(hook.endpoint.id, 1)).length === 1,
    )
    await world.delivery.close()
    const again = await startDeliveryWorld(t, {
      store: world.store,
      webhookRetrySchedule: [400, 400],
    })
    const [first, second] = await receiver.waitFor(2)
    assert.ok(first !== undefined && second !== undefined)
    assert.ok(second.at - first.at >= 390, `retried after ${second.at - first.at} ms`)
    await receiver.waitFor(3)
    await eventually(
      async () => (await again.store.webhooks.get(hook.endpoint.id))?.endpoint.enabled === false,
    )
    const log = await again.store.webhooks.attempts(hook.endpoint.id, 10)
    assert.deepEqual(
      log.map((entry) => entry.attempt),
      [3, 2, 1],
    )
  })
})

describe('webhook delivery: endpoints apart, addresses, secrets', () => {
  it('never lets an endpoint that does not answer delay another, nor a write', async (t) => {
    const silent = await startRawServer(() => undefined)
    const receiver = await startReceiver()
    t.after(() => Promise.all([silent.close(), receiver.close()]))
    const world = await startDeliveryWorld(t, { webhookTimeoutMs: 5000 })
    await world.register(silent.url)
    await world.register(receiver.url)
    const started = Date.now()
    const ids = [await world.write(), await world.write(), await world.write()]
    assert.ok(Date.now() - started < 500, 'writes do not wait for deliveries')
    await receiver.waitFor(3, 1000)
    assert.deepEqual(
      receiver.received.map(idOf),
      ids.map((id) => `msg_${id}`),
    )
    assert.equal(silent.connections(), 1, 'one request in flight to the silent one')
    assert.ok(Date.now() - started < 1500)
  })

  it('sends every endpoint the same bytes for an event, each signed by its own secret', async (t) => {
    const one = await startReceiver()
    const two = await startReceiver()
    t.after(() => Promise.all([one.close(), two.close()]))
    const world = await startDeliveryWorld(t)
    const first = await world.register(one.url)
    const second = await world.register(`${two.url}/other`)
    await world.write()
    const [a] = await one.waitFor(1)
    const [b] = await two.waitFor(1)
    assert.ok(a !== undefined && b !== undefined)
    assert.deepEqual(a.body, b.body)
    assert.equal(idOf(a), idOf(b))
    assert.doesNotThrow(() => verifyDelivery(first.secret, a))
    assert.doesNotThrow(() => verifyDelivery(second.secret, b))
    assert.throws(() => verifyDelivery(first.secret, b))
  })

  it('refuses a name that resolves to a private address without WEBHOOK_ALLOW_NETWORKS', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookAllowNetworks: [] })
    const hook = await world.register(`http://localhost:${receiver.port}/`)
    await world.write()
    await eventually(
      async () => (await world.store.webhooks.attempts(hook.endpoint.id, 1)).length === 1,
    )
    const [entry] = await world.store.webhooks.attempts(hook.endpoint.id, 1)
    assert.equal(entry?.result, 'failed')
    assert.equal(entry?.error, 'private_address')
    assert.equal(entry?.responseStatus, null)
    assert.equal(receiver.connections(), 0)
  })

  it('names the TLS reason on the warn line of an attempt to a self-signed receiver', async (t) => {
    const receiver = await startSelfSignedReceiver()
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t)
    const hook = await world.register(receiver.url)
    const id = await world.write()
    await eventually(() => world.lines.some((line) => line.msg === 'webhook attempt failed'))
    const line = world.lines.find((entry) => entry.msg === 'webhook attempt failed')
    assert.equal(line?.level, 'warn')
    assert.deepEqual(line?.fields, {
      endpointId: hook.endpoint.id,
      eventId: id,
      attempt: 1,
      error: 'connection_failed',
      responseStatus: null,
      tlsReason: 'DEPTH_ZERO_SELF_SIGNED_CERT',
    })
    const [entry] = await world.store.webhooks.attempts(hook.endpoint.id, 1)
    assert.equal(entry?.error, 'connection_failed')
  })

  it('sends the next attempt to a changed URL', async (t) => {
    const first = await startReceiver()
    const second = await startReceiver()
    t.after(() => Promise.all([first.close(), second.close()]))
    const world = await startDeliveryWorld(t)
    const hook = await world.register(first.url)
    await world.write()
    await first.waitFor(1)
    await world.patch(hook.endpoint.id, { url: second.url })
    const id = await world.write()
    assert.equal(idOf((await second.waitFor(1))[0]), `msg_${id}`)
    assert.equal(first.received.length, 1)
  })

  it('signs with both secrets during a rotation overlap, the current first, then with one', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t)
    const previous = newSecret()
    const hook = await world.register(receiver.url, {
      previousSecretExpiresAt: new Date(Date.now() + 60_000).toISOString(),
    })
    const rotated: StoredWebhook = await world.store.webhooks.update(
      hook.endpoint.id,
      (current) => ({
        ...current,
        previousSecret: previous,
      }),
    )
    world.delivery.changed(hook.endpoint.id)
    await world.write()
    const [request] = await receiver.waitFor(1)
    assert.ok(request !== undefined)
    const signatures = String(request.headers['webhook-signature']).split(' ')
    assert.equal(signatures.length, 2)
    assert.doesNotThrow(() => verifyDelivery(rotated.secret, request))
    assert.doesNotThrow(() => verifyDelivery(previous, request))
    await world.patch(hook.endpoint.id, {
      previousSecretExpiresAt: new Date(Date.now() - 1).toISOString(),
    })
    await world.write()
    const [, later] = await receiver.waitFor(2)
    assert.ok(later !== undefined)
    assert.equal(String(later.headers['webhook-signature']).split(' ').length, 1)
    assert.doesNotThrow(() => verifyDelivery(rotated.secret, later))
    assert.throws(() => verifyDelivery(previous, later))
  })
})

describe('webhook delivery: reading ahead', () => {
  it('reads the feed a page at a time when it is behind, not once per event', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    let paused = true
    const reads: EventQuery[] = []
    const world = await startDeliveryWorld(t, {
      paused: () => paused,
      feed: (events) => ({
        read: (query) => {
          reads.push(query)
          return events.read(query)
        },
        head: () => events.head(),
        subscribe: (wake) => events.subscribe(wake),
        get appended() {
          return events.appended
        },
      }),
    })
    const hook = await world.register(receiver.url)
    const ids: string[] = []
    for (let i = 0; i < 150; i += 1) ids.push(await world.write())
    paused = false
    const received = await receiver.waitFor(150)
    assert.deepEqual(
      received.map(idOf),
      ids.map((id) => `msg_${id}`),
    )
    await eventually(async () => (await world.store.webhooks.cursor(hook.endpoint.id)) === ids[149])
    // 64, 64 and 22 events, then the look that finds none: not 150 reads.
    assert.ok(reads.length <= 5, `${reads.length} reads of the feed for 150 events`)
    assert.ok(reads.every((query) => query.limit === READ_AHEAD_EVENTS))
  })
})

/**
 * A feed for delivery whose reads, once closed, wait until it opens again: a loop caught between
 * its reads of the store and its attempt. `waiting` settles at the first read held.
 */
function feedGate(): {
  feed: (events: EventFeed) => EventFeed
  waiting: Promise<void>
  close: () => void
  open: () => void
} {
  let gate: Promise<void> | undefined
  let opened = (): void => undefined
  let held = (): void => undefined
  const waiting = new Promise<void>((resolve) => {
    held = resolve
  })
  return {
    feed: (events) => ({
      read: async (query) => {
        if (gate !== undefined) {
          held()
          await gate
        }
        return events.read(query)
      },
      head: () => events.head(),
      subscribe: (wake) => events.subscribe(wake),
      get appended() {
        return events.appended
      },
    }),
    waiting,
    close() {
      gate = new Promise((resolve) => {
        opened = resolve
      })
    },
    open() {
      gate = undefined
      opened()
    },
  }
}

describe('webhook delivery: stopping and pausing', () => {
  it('starts no attempt to an endpoint after it is removed', async (t) => {
    const receiver = await startReceiver((_, res) => res.writeHead(500).end())
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [100, 100, 100, 100] })
    const hook = await world.register(receiver.url)
    await world.write()
    await receiver.waitFor(1)
    await world.store.webhooks.delete(hook.endpoint.id)
    world.delivery.removed(hook.endpoint.id)
    const seen = receiver.received.length
    await world.write()
    await new Promise((resolve) => setTimeout(resolve, 500))
    assert.equal(receiver.received.length, seen)
  })

  it('starts no attempt after a removal told while its loop waits on the store', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const gate = feedGate()
    const world = await startDeliveryWorld(t, { feed: gate.feed })
    const hook = await world.register(receiver.url)
    gate.close()
    await world.write()
    await gate.waiting
    await world.store.webhooks.delete(hook.endpoint.id)
    world.delivery.removed(hook.endpoint.id)
    gate.open()
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.equal(receiver.received.length, 0)
  })

  it('starts no attempt once its lease is lost while its loop waits on the store', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const gate = feedGate()
    const store = new MemoryStore()
    // Another process takes the lease over (this one failed to renew it in time).
    let taken = false
    const lease = store.webhooks.lease.bind(store.webhooks)
    store.webhooks.lease = (id, holder, ms) =>
      taken ? Promise.resolve(false) : lease(id, holder, ms)
    const world = await startDeliveryWorld(t, {
      store,
      feed: gate.feed,
      timings: { leaseMs: 2000, renewMs: 20, pollMs: 50, refreshMs: 200 },
    })
    await world.register(receiver.url)
    gate.close()
    await world.write()
    await gate.waiting
    taken = true
    // A renewal or two: the loop learns the lease is gone.
    await new Promise((resolve) => setTimeout(resolve, 100))
    gate.open()
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.equal(receiver.received.length, 0)
    taken = false
    await receiver.waitFor(1)
  })

  it('abandons the attempt in flight on close, without logging it', async (t) => {
    const silent = await startRawServer(() => undefined)
    t.after(() => silent.close())
    const world = await startDeliveryWorld(t, { webhookTimeoutMs: 10_000 })
    const hook = await world.register(silent.url)
    await world.write()
    await eventually(() => silent.connections() === 1)
    const started = Date.now()
    await world.delivery.close()
    assert.ok(Date.now() - started < 500, `closed in ${Date.now() - started} ms`)
    await eventually(() => silent.closed() === 1)
    assert.deepEqual(await world.store.webhooks.attempts(hook.endpoint.id, 10), [])
    assert.deepEqual(world.delivery.counts(), {
      attemptsSucceeded: 0,
      attemptsFailed: 0,
      endpointsEnabled: 0,
      endpointsDisabled: 0,
    })
  })

  it('waits while paused (maintenance, a read-only store), then goes on', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    let paused = true
    const world = await startDeliveryWorld(t, { paused: () => paused })
    await world.register(receiver.url)
    const id = await world.write()
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.equal(receiver.connections(), 0)
    paused = false
    assert.equal(idOf((await receiver.waitFor(1))[0]), `msg_${id}`)
  })

  it('logs a store that keeps failing once at warn, then once at info when it works again', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    let failing = false
    const world = await startDeliveryWorld(t, {
      feed: (events) => ({
        read: (query) =>
          failing ? Promise.reject(new Error('the disk refuses for now')) : events.read(query),
        head: () => events.head(),
        subscribe: (wake) => events.subscribe(wake),
        get appended() {
          return events.appended
        },
      }),
    })
    await world.register(receiver.url)
    failing = true
    const id = await world.write()
    // About 10 polls of 50 ms, each failing.
    await eventually(
      () => world.lines.filter((line) => line.msg === 'webhook delivery still stopped').length >= 5,
    )
    const warned = world.lines.filter((line) => line.level === 'warn')
    assert.deepEqual(
      warned.map((line) => [line.msg, line.fields.error]),
      [['webhook delivery stopped for a while', 'the disk refuses for now']],
    )
    failing = false
    assert.equal(idOf((await receiver.waitFor(1))[0]), `msg_${id}`)
    const again = () => world.lines.filter((line) => line.msg === 'webhook delivery works again')
    await eventually(() => again().length > 0)
    const back = again()
    assert.equal(back.length, 1)
    assert.equal(back[0]?.level, 'info')
    assert.ok(Number(back[0]?.fields.failures) >= 6, JSON.stringify(back[0]))
    assert.equal(world.lines.filter((line) => line.level === 'warn').length, 1)
  })

  it('counts attempts by result and endpoints by state', async (t) => {
    let status = 500
    const receiver = await startReceiver((_, res) => res.writeHead(status).end())
    t.after(() => receiver.close())
    const world = await startDeliveryWorld(t, { webhookRetrySchedule: [50] })
    await world.register(receiver.url)
    await world.register(receiver.url, { enabled: false, disabledReason: 'manual' })
    await world.write()
    await receiver.waitFor(1)
    status = 200
    await eventually(() => world.delivery.counts().attemptsSucceeded === 1)
    assert.deepEqual(world.delivery.counts(), {
      attemptsSucceeded: 1,
      attemptsFailed: 1,
      endpointsEnabled: 1,
      endpointsDisabled: 1,
    })
  })
})
