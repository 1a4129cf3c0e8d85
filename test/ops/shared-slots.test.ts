import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { createLocalSlots, SlotCounts } from '../../src/ops/shared-slots.js'

describe('SlotCounts', () => {
  it('takes up to max slots of a name across holders, and gives back what a holder took', () => {
    const counts = new SlotCounts()
    assert.equal(counts.take('event-streams', 2, 1), true)
    assert.equal(counts.take('event-streams', 2, 2), true)
    assert.equal(counts.take('event-streams', 2, 1), false)
    // Another name is counted apart.
    assert.equal(counts.take('import', 1, 2), true)
    assert.equal(counts.take('import', 1, 1), false)
    // A holder gives back only what it holds.
    counts.give('import', 1)
    assert.equal(counts.taken('import'), 1)
    counts.give('event-streams', 1)
    assert.equal(counts.taken('event-streams'), 1)
    counts.give('event-streams', 1)
    assert.equal(counts.taken('event-streams'), 1)
  })

  it('gives back every slot of a holder that is gone', () => {
    const counts = new SlotCounts()
    counts.take('event-streams', 5, 7)
    counts.take('event-streams', 5, 7)
    counts.take('event-streams', 5, 8)
    counts.take('import', 1, 7)
    counts.drop(7)
    assert.equal(counts.taken('event-streams'), 1)
    assert.equal(counts.taken('import'), 0)
    counts.drop(7)
    assert.equal(counts.taken('event-streams'), 1)
    assert.equal(counts.take('import', 1, 8), true)
  })
})

describe('createLocalSlots', () => {
  it('refuses past max at once, and a slot released twice is given back once', async () => {
    const slots = createLocalSlots()
    const [a, b, c] = await Promise.all([
      slots.acquire('event-streams', 2),
      slots.acquire('event-streams', 2),
      slots.acquire('event-streams', 2),
    ])
    assert.ok(a !== undefined && b !== undefined)
    assert.equal(c, undefined)
    a.release()
    a.release()
    const d = await slots.acquire('event-streams', 2)
    assert.ok(d !== undefined)
    assert.equal(await slots.acquire('event-streams', 2), undefined)
  })
})
