import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import { sleep } from '../helpers/child.js'
import { waitFor } from '../helpers/ops.js'
import { freshSchema, replicaStore, SKIP_POSTGRES } from '../helpers/postgres.js'
import { startService, type TestService } from '../helpers/service.js'
import { ADMIN, type EndpointWithSecret } from '../helpers/webhook-api.js'
import {
  type Received,
  type Receiver,
  startReceiver,
  verifyDelivery,
} from '../helpers/webhook-receivers.js'

const LOCAL = { webhookAllowNetworks: ['127.0.0.0/8'] }

interface Replicas {
  readonly a: TestService
  readonly b: TestService
  readonly receiver: Receiver
  readonly hook: EndpointWithSecret
}

/**
 * Two services on one schema, and an endpoint made through `a`: `a` is told of it at once and
 * takes its lease, `b` learns of it only from its next listing. Users are created through `a`
 * every few ms until the test ends, so that deliveries go on all the time.
 */
async function replicasDelivering(t: TestContext): Promise<Replicas> {
  // A receiver that answers a little later, so that an attempt is mostly waiting on it.
  const receiver = await startReceiver((_, res) => setTimeout(() => res.writeHead(204).end(), 20))
  t.after(() => receiver.close())
  const schema = freshSchema(t)
  const replica = () => startService(t, { store: replicaStore(t, schema), ...LOCAL })
  const a = await replica()
  const b = await replica()
  const created = await a.call('POST', '/webhooks', { token: ADMIN, json: { url: receiver.url } })
  assert.equal(created.status, 201, created.text)
  let writing = true
  const writer = (async () => {
    // Until the test ends; what the stores answer while they close does not matter.
    while (writing) {
      await a.createUser().catch(() => undefined)
      await sleep(10)
    }
  })()
  t.after(async () => {
    writing = false
    await writer
  })
  await receiver.waitFor(3, 15_000)
  return { a, b, receiver, hook: created.json<EndpointWithSecret>() }
}

/**
 * The requests that arrived after `time`, less one attempt that `a` may have sent just before the
 * change committed and that reached the receiver just after its 200 (docs/webhooks.md: an attempt
 * in flight at a change finishes with the endpoint as it was).
 */
const after = (receiver: Receiver, time: number): Received[] => {
  const later = receiver.received.filter((request) => request.at > time)
  const first = later[0]
  return first !== undefined && first.at - time < 200 ? later.slice(1) : later
}

const cursorOf = async (s: TestService, id: string): Promise<string> => {
  const res = await s.call('GET', `/webhooks/${id}/cursor`, { token: ADMIN })
  assert.equal(res.status, 200, res.text)
  return res.json<{ after: string }>().after
}

describe('an endpoint changed through the replica that does not deliver to it', {
  skip: SKIP_POSTGRES,
}, () => {
  it('once disabled, gets no request after the 200 from any replica, and its cursor stays', {
    timeout: 60_000,
  }, async (t) => {
    const { b, receiver, hook } = await replicasDelivering(t)
    const res = await b.call('PATCH', `/webhooks/${hook.id}`, {
      token: ADMIN,
      json: { enabled: false },
    })
    const answered = Date.now()
    assert.equal(res.status, 200, res.text)
    const cursor = await cursorOf(b, hook.id)
    // Longer than an attempt and its acknowledgment, shorter than a listing (5 s).
    await sleep(2000)
    assert.deepEqual(
      after(receiver, answered).map((request) => request.headers['webhook-id']),
      [],
    )
    assert.equal(await cursorOf(b, hook.id), cursor)
  })

  it('after a rotation with no overlap, signs every later delivery with the new secret only', {
    timeout: 60_000,
  }, async (t) => {
    const { b, receiver, hook } = await replicasDelivering(t)
    const res = await b.call('POST', `/webhooks/${hook.id}:rotateSecret`, {
      token: ADMIN,
      json: { overlapSeconds: 0 },
    })
    const answered = Date.now()
    assert.equal(res.status, 200, res.text)
    const rotated = res.json<EndpointWithSecret>()
    await sleep(2000)
    // At least two deliveries after the change, however long a loaded machine takes to send them.
    await waitFor(
      'two deliveries after the rotation',
      () => (after(receiver, answered).length >= 2 ? true : undefined),
      15_000,
    )
    const later = after(receiver, answered)
    assert.ok(later.length >= 2, `${later.length} deliveries after the rotation`)
    for (const request of later) {
      assert.doesNotThrow(() => verifyDelivery(rotated.secret, request))
      assert.throws(() => verifyDelivery(hook.secret, request))
    }
  })
})
