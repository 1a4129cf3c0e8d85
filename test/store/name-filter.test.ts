/**
 * The filter of kept keys' names: never a false "absent", rare false "maybe" at the load it is
 * sized for, and a fixed size whatever it holds.
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { describe, it } from 'node:test'

import { NameFilter } from '../../src/store/name-filter.js'

const digest = (text: string): string => `${createHash('sha256').update(text).digest('hex')}.json`

describe('NameFilter', () => {
  it('says "maybe" for every name added and "absent" for nearly every other, at 100,000 names in 1 MiB', () => {
    const filter = new NameFilter()
    assert.equal(filter.bytes, 1024 * 1024)
    for (let n = 0; n < 100_000; n += 1) filter.add(digest(`kept ${n}`))
    for (let n = 0; n < 100_000; n += 1) assert.equal(filter.mightHold(digest(`kept ${n}`)), true)
    let falsePositives = 0
    for (let n = 0; n < 100_000; n += 1)
      if (filter.mightHold(digest(`other ${n}`))) falsePositives += 1
    // About 0.07 expected (6.5e-7 each): 5 would be a filter that does not spread its bits.
    assert.ok(falsePositives < 5, `${falsePositives} false positives`)
    assert.equal(filter.bytes, 1024 * 1024, 'its size does not grow')
  })

  it('says "absent" for every name of an empty filter, and "maybe" for all once a small one is full', () => {
    const empty = new NameFilter(10)
    assert.equal(empty.bytes, 128)
    for (let n = 0; n < 1000; n += 1) assert.equal(empty.mightHold(digest(`x ${n}`)), false)
    const small = new NameFilter(5)
    for (let n = 0; n < 1000; n += 1) small.add(digest(`y ${n}`))
    assert.equal(small.mightHold(digest('never added')), true)
  })

  it('refuses a size it cannot read from a name, and a name that is not a hex digest', () => {
    assert.throws(() => new NameFilter(4), RangeError)
    assert.throws(() => new NameFilter(29), RangeError)
    assert.throws(() => new NameFilter(10.5), RangeError)
    assert.throws(() => new NameFilter().add('not-a-digest-name'), /not a hex digest name/)
    assert.throws(() => new NameFilter().mightHold('short'), /not a hex digest name/)
  })
})
