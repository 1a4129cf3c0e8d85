import assert from 'node:assert/strict'
import { rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { HttpError } from '../../src/errors.js'
import { Availability, type AvailabilityOptions } from '../../src/ops/availability.js'
import { sleep } from '../helpers/child.js'
import { blockEventLoop, waitFor } from '../helpers/ops.js'
import { makeTempDir } from '../helpers/service.js'

function createAvailability(t: TestContext, options: Partial<AvailabilityOptions> = {}): Availability {
  const availability = new Availability({ maxInflight: 10, maxEventLoopDelayMs: 1000, ...options })
  t.after(() => { availability.stop() })
  return availability
}

function assertRefusal(refusal: HttpError | undefined, code: string, retryAfter: string): void {
  assert.ok(refusal !== undefined, `expected a ${code} refusal, got none`)
  assert.equal(refusal.code, code)
  assert.equal(refusal.status, 503)
  assert.equal(refusal.headers['retry-after'], retryAfter)
}

describe('Availability phases', () => {
  it('refuses with starting until markReady, then serves', (t) => {
    const availability = createAvailability(t)
    assert.equal(availability.phase, 'starting')
    assertRefusal(availability.refusal(), 'starting', '1')
    availability.markReady()
    assert.equal(availability.phase, 'ready')
    assert.equal(availability.refusal(), undefined)
  })

  it('refuses with shutting_down after beginShutdown, and markReady does not undo it', (t) => {
    const availability = createAvailability(t)
    availability.markReady()
    availability.beginShutdown()
    assert.equal(availability.phase, 'stopping')
    assertRefusal(availability.refusal(), 'shutting_down', '5')
    availability.markReady()
    assertRefusal(availability.refusal(), 'shutting_down', '5')
  })

  it('says shutting_down even while still starting', (t) => {
    const availability = createAvailability(t)
    availability.beginShutdown()
    assertRefusal(availability.refusal(), 'shutting_down', '5')
  })
})

describe('Availability in-flight limit', () => {
  it('counts requests in flight and refuses with overloaded past maxInflight', (t) => {
    const availability = createAvailability(t, { maxInflight: 2 })
    availability.markReady()
    availability.enter()
    availability.enter()
    assert.equal(availability.inflight, 2)
    assert.equal(availability.refusal(), undefined)
    availability.enter()
    assert.equal(availability.inflight, 3)
    assertRefusal(availability.refusal(), 'overloaded', '1')
    availability.leave()
    assert.equal(availability.inflight, 2)
    assert.equal(availability.refusal(), undefined)
  })
})

describe('Availability maintenance file', () => {
  it('notices the file appearing and going away within a few check intervals', async (t) => {
    const file = path.join(await makeTempDir(t), 'maintenance')
    const availability = createAvailability(t, { maintenanceFile: file, checkIntervalMs: 20 })
    availability.start()
    availability.markReady()
    await sleep(60)
    assert.equal(availability.refusal(), undefined)
    await writeFile(file, '')
    const refusal = await waitFor('maintenance', () => availability.refusal(), 1000, 10)
    assertRefusal(refusal, 'maintenance', '30')
    await rm(file)
    await waitFor('the end of maintenance', () => (availability.refusal() === undefined ? true : undefined), 1000, 10)
  })

  it('prefers starting and shutting_down over maintenance', async (t) => {
    const dir = await makeTempDir(t)
    const file = path.join(dir, 'maintenance')
    await writeFile(file, '')
    const availability = createAvailability(t, { maintenanceFile: file, checkIntervalMs: 20 })
    availability.start()
    await sleep(60)
    assertRefusal(availability.refusal(), 'starting', '1')
    availability.markReady()
    assertRefusal(availability.refusal(), 'maintenance', '30')
    availability.beginShutdown()
    assertRefusal(availability.refusal(), 'shutting_down', '5')
  })

  it('stops looking at the file after stop()', async (t) => {
    const file = path.join(await makeTempDir(t), 'maintenance')
    const availability = createAvailability(t, { maintenanceFile: file, checkIntervalMs: 20 })
    availability.start()
    availability.markReady()
    await sleep(60)
    availability.stop()
    await writeFile(file, '')
    await sleep(120)
    assert.equal(availability.refusal(), undefined)
  })

  it('never reports maintenance without a maintenance file option', async (t) => {
    const availability = createAvailability(t, { checkIntervalMs: 20 })
    availability.start()
    availability.markReady()
    await sleep(60)
    assert.equal(availability.refusal(), undefined)
  })
})

describe('Availability event-loop delay', () => {
  it('refuses with overloaded after the event loop was blocked past the limit, then recovers', async (t) => {
    const availability = createAvailability(t, { maxEventLoopDelayMs: 100, checkIntervalMs: 100 })
    availability.start()
    availability.markReady()
    await sleep(150)
    assert.equal(availability.refusal(), undefined)
    blockEventLoop(300)
    const refusal = await waitFor('overloaded', () => availability.refusal(), 2000, 5)
    assertRefusal(refusal, 'overloaded', '1')
    await waitFor('recovery', () => (availability.refusal() === undefined ? true : undefined), 2000, 20)
  })

  it('does not count the sampling interval as delay: an idle loop with a 10 ms limit serves', async (t) => {
    const availability = createAvailability(t, { maxEventLoopDelayMs: 10, checkIntervalMs: 200 })
    availability.start()
    availability.markReady()
    await sleep(700)
    assert.equal(availability.refusal(), undefined)
  })
})
