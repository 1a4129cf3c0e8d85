import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { eventIdNumber, formatEventId, idFloor } from '../../src/domain/event.js'

describe('idFloor', () => {
  it('is the clock in ms times 256: a later start numbers above an earlier one', () => {
    const now = Date.parse('2026-11-29T04:00:00.000Z')
    assert.equal(idFloor(now), now * 256)
    assert.equal(idFloor(now + 0.9), now * 256, 'whole milliseconds')
    assert.ok(idFloor(now + 1) > idFloor(now) + 255)
  })

  it('stays where an id is read as a number without a BigInt, up to the year 2500', () => {
    const far = Date.parse('2500-01-01T00:00:00.000Z')
    const id = formatEventId(idFloor(far))
    assert.match(id, /^000[0-9a-f]{13}$/)
    assert.equal(eventIdNumber(id), idFloor(far))
  })

  it('is 0 for a clock that cannot be right, which leaves the ids to the log and the counter', () => {
    for (const now of [
      0,
      -1,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Date.parse('2600-01-01T00:00:00.000Z'),
    ]) {
      assert.equal(idFloor(now), 0, String(now))
    }
  })
})
