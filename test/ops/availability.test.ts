import assert from 'node:assert/strict'
import { rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { HttpError } from '../../src/http/problem.js'
import { Availability, type AvailabilityOptions } from '../../src/ops/availability.js'
import { sleep } from '../helpers/child.js'
import { blockEventLoop, waitFor } from '../helpers/ops.js'
import { makeTempDir } from '../helpers/service.js'

function createAvailability(
  t: TestContext,
  options: Partial<AvailabilityOptions> = {},
): Availability {
  const availability = new Availability({ maxInflight: 10, maxEventLoopDelayMs: 1000, ...options })
  t.after(() => {
    availability.stop()
  })
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

/** Waits until `availability` has noticed that its maintenance file exists (its write gate refuses). */
function noticedMaintenance(availability: Availability): Promise<true> {
  return waitFor(
    'the maintenance file to be noticed',
    () => {
      try {
        availability.writeGate()
        return undefined
      } catch {
        return true
      }
    },
    5000,
    10,
  )
}

/**
 * Waits until every check an Availability with a `checkIntervalMs` interval began before this call
 * has ended: a witness on a file of its own has to notice the file appear and then go away, two
 * whole checks begun after this call.
 */
async function waitForWholeChecks(t: TestContext, checkIntervalMs: number): Promise<void> {
  const file = path.join(await makeTempDir(t), 'witness')
  const witness = createAvailability(t, { maintenanceFile: file, checkIntervalMs })
  witness.start()
  await writeFile(file, '')
  await noticedMaintenance(witness)
  await rm(file)
  await waitFor(
    'the witness to notice the end',
    () => {
      try {
        witness.writeGate()
        return true
      } catch {
        return undefined
      }
    },
    5000,
    10,
  )
}

describe('Availability maintenance file', () => {
  it('notices the file appearing and going away', async (t) => {
    const file = path.join(await makeTempDir(t), 'maintenance')
    const availability = createAvailability(t, { maintenanceFile: file, checkIntervalMs: 20 })
    availability.start()
    availability.markReady()
    await waitForWholeChecks(t, 20)
    assert.equal(availability.refusal(), undefined, 'no maintenance before the file exists')
    await writeFile(file, '')
    const refusal = await waitFor('maintenance', () => availability.refusal(), 5000, 10)
    assertRefusal(refusal, 'maintenance', '30')
    await rm(file)
    await waitFor(
      'the end of maintenance',
      () => (availability.refusal() === undefined ? true : undefined),
      5000,
      10,
    )
  })

  it('prefers starting and shutting_down over maintenance', async (t) => {
    const dir = await makeTempDir(t)
    const file = path.join(dir, 'maintenance')
    await writeFile(file, '')
    const availability = createAvailability(t, { maintenanceFile: file, checkIntervalMs: 20 })
    availability.start()
    await noticedMaintenance(availability)
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
    await waitForWholeChecks(t, 20)
    availability.stop()
    await writeFile(file, '')
    // Checks that a running timer would have made since the file appeared have all ended.
    await waitForWholeChecks(t, 20)
    assert.equal(availability.refusal(), undefined)
    assert.doesNotThrow(() => {
      availability.writeGate()
    })
  })

  it('never reports maintenance without a maintenance file option', async (t) => {
    const availability = createAvailability(t, { checkIntervalMs: 20 })
    availability.start()
    availability.markReady()
    await waitForWholeChecks(t, 20)
    assert.equal(availability.refusal(), undefined)
    assert.doesNotThrow(() => {
      availability.writeGate()
    })
  })
})

describe('Availability event-loop delay', () => {
  it('refuses with overloaded after the event loop was blocked past the limit, then recovers', async (t) => {
    // A limit no idle loop reaches by chance, a block far past it, and a check interval long
    // enough that the refusal lasts a while: the polls below cannot miss it.
    const availability = createAvailability(t, { maxEventLoopDelayMs: 250, checkIntervalMs: 500 })
    availability.start()
    availability.markReady()
    assert.equal(availability.refusal(), undefined)
    // The monitor measures from its first sample (every 20 ms): let one pass before blocking.
    await sleep(50)
    blockEventLoop(1000)
    const refusal = await waitFor('overloaded', () => availability.refusal(), 10_000, 5)
    assertRefusal(refusal, 'overloaded', '1')
    await waitFor(
      'recovery',
      () => (availability.refusal() === undefined ? true : undefined),
      10_000,
      20,
    )
  })

  it('does not count the sampling interval as delay: an idle loop under a 10 ms limit is served again', async (t) => {
    // The monitor samples every 20 ms, so a loop counting the sampling interval as delay reads at
    // least 20 ms and never goes under this limit; one check of an idle stretch is enough for an
    // honest one. Blocking first makes sure the refusal seen at the end comes from a real check.
    const availability = createAvailability(t, { maxEventLoopDelayMs: 10, checkIntervalMs: 100 })
    availability.start()
    availability.markReady()
    await sleep(50)
    blockEventLoop(300)
    assertRefusal(
      await waitFor('overloaded', () => availability.refusal(), 10_000, 5),
      'overloaded',
      '1',
    )
    await waitFor(
      'an idle check to serve again',
      () => (availability.refusal() === undefined ? true : undefined),
      10_000,
      5,
    )
  })
})
