import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { FORWARD_GRACE_MS, steadyClock, upkeepClock } from '../../src/store/upkeep-clock.js'

const HOUR_MS = 3_600_000
const DAY_MS = 24 * HOUR_MS

/** A wall clock and a monotonic one that the test moves. */
function clocks() {
  const state = { wall: 1_800_000_000_000, mono: 1000 }
  const clock = steadyClock(
    () => state.wall,
    () => state.mono,
  )
  const pass = (ms: number): void => {
    state.wall += ms
    state.mono += ms
  }
  return { state, clock, pass }
}

describe('the upkeep clock', () => {
  it('follows the wall clock as time passes, and back at once when it is set back', () => {
    const { state, clock, pass } = clocks()
    pass(5000)
    assert.equal(clock(), state.wall)
    state.wall -= HOUR_MS
    assert.equal(clock(), state.wall)
    pass(1000)
    assert.equal(clock(), state.wall)
  })

  it('does not follow a step forward that is undone within the grace', () => {
    const { state, clock, pass } = clocks()
    const before = clock()
    state.wall += 40 * DAY_MS
    pass(60_000)
    assert.equal(clock(), before + 60_000)
    state.wall -= 40 * DAY_MS
    pass(1000)
    assert.equal(clock(), state.wall)
  })

  it('believes a step forward that stays for the grace (a clock that was behind, corrected)', () => {
    const { state, clock, pass } = clocks()
    state.wall += HOUR_MS
    clock()
    pass(FORWARD_GRACE_MS - 1)
    assert.ok(clock() < state.wall)
    pass(1)
    assert.equal(clock(), state.wall)
  })

  it('takes an injected clock as it is (a test or an embedder moves it on purpose)', () => {
    const injected = (): number => 42
    assert.equal(upkeepClock(injected), injected)
    assert.notEqual(upkeepClock(undefined), Date.now)
  })
})
