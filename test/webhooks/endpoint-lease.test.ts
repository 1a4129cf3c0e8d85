import assert from 'node:assert/strict'
import { performance } from 'node:perf_hooks'
import { describe, it } from 'node:test'

import { EndpointLease } from '../../src/webhooks/endpoint-lease.js'
import { eventually } from '../helpers/webhook-receivers.js'

describe('the lease of an endpoint', () => {
  it('is given back after a renewal in flight, not before it: the others are not kept out', async () => {
    // The database's lease row, and a renewal the test holds before the store applies it.
    let holder: string | undefined
    let renewals = 0
    let letRenewalThrough: (() => void) | undefined
    const webhooks = {
      async lease(_id: string, asking: string): Promise<boolean> {
        if (holder !== undefined) {
          renewals += 1
          await new Promise<void>((resolve) => {
            letRenewalThrough = resolve
          })
        }
        holder = asking
        return true
      },
      async releaseLease(_id: string, asking: string): Promise<void> {
        if (holder === asking) holder = undefined
      },
    }
    const lease = new EndpointLease({
      webhooks,
      id: 'endpoint',
      holder: 'a',
      leaseMs: 10_000,
      renewMs: 10,
      onLost: () => assert.fail('the lease was not lost'),
    })
    assert.equal(await lease.hold(), true)
    await eventually(async () => renewals === 1)
    const released = lease.release()
    // The release reaches the store after the renewal whatever their order of sending.
    await new Promise((resolve) => setTimeout(resolve, 20))
    letRenewalThrough?.()
    await released
    assert.equal(holder, undefined, 'the lease is still held after its release')
    assert.equal(lease.held, false)
    assert.equal(renewals, 1)
  })
})

/** A lease row the test answers for: each call recorded, each answer chosen by the test. */
function scriptedStore(answer: (call: number) => Promise<boolean>) {
  const calls: { id: string; holder: string; ms: number; at: number }[] = []
  const released: string[] = []
  return {
    calls,
    released,
    webhooks: {
      lease(id: string, holder: string, ms: number): Promise<boolean> {
        calls.push({ id, holder, ms, at: performance.now() })
        return answer(calls.length)
      },
      async releaseLease(_id: string, holder: string): Promise<void> {
        released.push(holder)
      },
    },
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
const never = (): Promise<boolean> => new Promise<boolean>(() => undefined)

describe('the lease of an endpoint, held and lost', () => {
  it('is not held while another process holds it, and nothing is renewed', async () => {
    const store = scriptedStore(async () => false)
    const lease = new EndpointLease({
      ...store,
      id: 'endpoint',
      holder: 'a',
      leaseMs: 1000,
      renewMs: 5,
      onLost: () => assert.fail('a lease never held cannot be lost'),
    })
    assert.equal(await lease.hold(), false)
    assert.equal(lease.held, false)
    await sleep(40)
    assert.deepEqual(
      store.calls.map(({ id, holder, ms }) => ({ id, holder, ms })),
      [{ id: 'endpoint', holder: 'a', ms: 1000 }],
    )
    await lease.release()
    assert.deepEqual(store.released, [], 'a lease not held is not given back')
  })

  it('asks the store once while held, renews it in the background, and stops renewing once given back', async () => {
    const store = scriptedStore(async () => true)
    const lease = new EndpointLease({
      ...store,
      id: 'endpoint',
      holder: 'a',
      leaseMs: 1000,
      renewMs: 10,
      onLost: () => assert.fail('the lease was not lost'),
    })
    assert.equal(await lease.hold(), true)
    assert.equal(await lease.hold(), true)
    assert.equal(store.calls.length, 1, 'a held lease is not asked for again')
    await eventually(() => store.calls.length >= 3)
    await lease.release()
    assert.deepEqual(store.released, ['a'])
    assert.equal(lease.held, false)
    const asked = store.calls.length
    await sleep(50)
    assert.equal(store.calls.length, asked, 'renewed after its release')
  })

  it('renews on one timer when two holds are asked at once', async () => {
    const store = scriptedStore(async () => true)
    const lease = new EndpointLease({
      ...store,
      id: 'endpoint',
      holder: 'a',
      leaseMs: 10_000,
      renewMs: 20,
      onLost: () => assert.fail('the lease was not lost'),
    })
    assert.deepEqual(await Promise.all([lease.hold(), lease.hold()]), [true, true])
    await sleep(200)
    await lease.release()
    // Two asks, then a renewal every 20 ms: about 10 in 200 ms on one timer, about 20 on two.
    assert.ok(store.calls.length <= 14, `${store.calls.length} asks of the store in 200 ms`)
  })

  it('is lost when a renewal finds another holder: onLost once, and no more renewals', async () => {
    const store = scriptedStore(async (call) => call === 1)
    let lost = 0
    // A lease of 10 s: lost at the first renewal's answer, not by running out.
    const lease = new EndpointLease({
      ...store,
      id: 'endpoint',
      holder: 'a',
      leaseMs: 10_000,
      renewMs: 10,
      onLost: () => {
        lost += 1
      },
    })
    assert.equal(await lease.hold(), true)
    await eventually(() => lost === 1, 2000)
    assert.equal(lease.held, false)
    const asked = store.calls.length
    await sleep(50)
    assert.equal(lost, 1)
    assert.equal(store.calls.length, asked, 'renewed after it was lost')
  })

  it('is not lost to a renewal refused while it is being given back: the release goes on', async () => {
    let refuseRenewal: ((held: boolean) => void) | undefined
    const store = scriptedStore((call) =>
      call === 1
        ? Promise.resolve(true)
        : new Promise<boolean>((resolve) => {
            refuseRenewal = resolve
          }),
    )
    const lease = new EndpointLease({
      ...store,
      id: 'endpoint',
      holder: 'a',
      leaseMs: 10_000,
      renewMs: 10,
      onLost: () => assert.fail('a lease being given back is not lost'),
    })
    assert.equal(await lease.hold(), true)
    await eventually(() => refuseRenewal !== undefined, 2000)
    const released = lease.release()
    refuseRenewal?.(false)
    await released
    assert.equal(lease.held, false)
    assert.deepEqual(store.released, ['a'])
  })

  it('is not lost to a store fault: a renewal that fails leaves it held, and the next renews it', async () => {
    const store = scriptedStore(async (call) => {
      if (call === 2 || call === 3) throw new Error('the database is away')
      return true
    })
    const lease = new EndpointLease({
      ...store,
      id: 'endpoint',
      holder: 'a',
      leaseMs: 1000,
      renewMs: 10,
      onLost: () => assert.fail('a store fault is not a loss'),
    })
    assert.equal(await lease.hold(), true)
    await eventually(() => store.calls.length >= 5)
    assert.equal(lease.held, true)
    await lease.release()
  })

  it('is given up a renewal before it runs out when no renewal is answered, counted from when it was asked', async () => {
    // The first grant takes 300 ms to come back; the renewals are never answered.
    const store = scriptedStore((call) => (call === 1 ? sleep(300).then(() => true) : never()))
    let lostAt: number | undefined
    const lease = new EndpointLease({
      ...store,
      id: 'endpoint',
      holder: 'a',
      leaseMs: 800,
      renewMs: 100,
      onLost: () => {
        lostAt = performance.now()
      },
    })
    assert.equal(await lease.hold(), true)
    const granted = performance.now()
    const asked = store.calls[0]?.at ?? Number.NaN
    await eventually(() => lostAt !== undefined, 2000)
    const lostAfter = (lostAt ?? Number.NaN) - asked
    // Run out at asked + 800 ms: given up at asked + 700 ms, so that nothing it sent is still in
    // flight when another process may take it; not 700 ms after the grant came back.
    assert.ok(lostAfter >= 695, `given up ${lostAfter.toFixed(0)} ms after it was asked`)
    assert.ok(
      (lostAt ?? Number.NaN) - granted < 600,
      `given up ${((lostAt ?? Number.NaN) - granted).toFixed(0)} ms after the grant came back`,
    )
    assert.equal(lease.held, false)
  })

  it('counts a short lease out by half of it when it renews less often', async () => {
    const store = scriptedStore((call) => (call === 1 ? Promise.resolve(true) : never()))
    let lostAt: number | undefined
    const lease = new EndpointLease({
      ...store,
      id: 'endpoint',
      holder: 'a',
      leaseMs: 400,
      renewMs: 10_000,
      onLost: () => {
        lostAt = performance.now()
      },
    })
    assert.equal(await lease.hold(), true)
    const asked = store.calls[0]?.at ?? Number.NaN
    await eventually(() => lostAt !== undefined, 2000)
    const lostAfter = (lostAt ?? Number.NaN) - asked
    assert.ok(
      lostAfter >= 195 && lostAfter < 380,
      `given up ${lostAfter.toFixed(0)} ms after it was asked`,
    )
  })

  it('gives the lease back even when the store cannot be told', async () => {
    const lease = new EndpointLease({
      webhooks: {
        lease: async () => true,
        releaseLease: async () => {
          throw new Error('the database is away')
        },
      },
      id: 'endpoint',
      holder: 'a',
      leaseMs: 1000,
      renewMs: 1000,
      onLost: () => assert.fail('the lease was not lost'),
    })
    assert.equal(await lease.hold(), true)
    await lease.release()
    assert.equal(lease.held, false)
  })
})
