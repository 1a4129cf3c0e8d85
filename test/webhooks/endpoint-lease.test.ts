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

type ScriptedStore = ReturnType<typeof scriptedStore>

/** The lease of holder `a` on endpoint `endpoint` of a scripted store. */
function leaseOn(
  store: ScriptedStore,
  leaseMs: number,
  renewMs: number,
  onLost: () => void = () => assert.fail('the lease was not lost'),
): EndpointLease {
  return new EndpointLease({
    webhooks: store.webhooks,
    id: 'endpoint',
    holder: 'a',
    leaseMs,
    renewMs,
    onLost,
  })
}

/** Holds a lease whose renewals are never answered; when it was asked, granted and given up. */
async function givenUp(
  firstAnswer: Promise<boolean>,
  leaseMs: number,
  renewMs: number,
): Promise<{ asked: number; granted: number; lost: number }> {
  const store = scriptedStore((call) => (call === 1 ? firstAnswer : never()))
  let lost: number | undefined
  const lease = leaseOn(store, leaseMs, renewMs, () => {
    lost = performance.now()
  })
  assert.equal(await lease.hold(), true)
  const granted = performance.now()
  await eventually(() => lost !== undefined, 2000)
  assert.equal(lease.held, false)
  return { asked: store.calls[0]?.at ?? Number.NaN, granted, lost: lost ?? Number.NaN }
}

describe('the lease of an endpoint, held and lost', () => {
  it('is not held while another process holds it, and nothing is renewed', async () => {
    const store = scriptedStore(async () => false)
    const lease = leaseOn(store, 1000, 5, () => assert.fail('a lease never held cannot be lost'))
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
    const lease = leaseOn(store, 1000, 10)
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
    const lease = leaseOn(store, 10_000, 20)
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
    const lease = leaseOn(store, 10_000, 10, () => {
      lost += 1
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
    const lease = leaseOn(store, 10_000, 10, () =>
      assert.fail('a lease being given back is not lost'),
    )
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
    const lease = leaseOn(store, 1000, 10, () => assert.fail('a store fault is not a loss'))
    assert.equal(await lease.hold(), true)
    await eventually(() => store.calls.length >= 5)
    assert.equal(lease.held, true)
    await lease.release()
  })

  it('is given up a renewal before it runs out when no renewal is answered, counted from when it was asked', async () => {
    // The first grant takes 300 ms to come back; it runs out at asked + 800 ms, and is given up
    // at asked + 700 ms, so that nothing it sent is still in flight when another process may
    // take it: not 700 ms after the grant came back.
    const { asked, granted, lost } = await givenUp(
      sleep(300).then(() => true),
      800,
      100,
    )
    assert.ok(lost - asked >= 695, `given up ${(lost - asked).toFixed(0)} ms after it was asked`)
    assert.ok(
      lost - granted < 600,
      `given up ${(lost - granted).toFixed(0)} ms after the grant came back`,
    )
  })

  it('counts a short lease out by half of it when it renews less often', async () => {
    const { asked, lost } = await givenUp(Promise.resolve(true), 400, 10_000)
    assert.ok(
      lost - asked >= 195 && lost - asked < 380,
      `given up ${(lost - asked).toFixed(0)} ms after it was asked`,
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
