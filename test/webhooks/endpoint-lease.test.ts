import assert from 'node:assert/strict'
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
