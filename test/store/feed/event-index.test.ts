import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import {
  compareCursors,
  cursorFloor,
  cursorValue,
  eventIdNumber,
  formatEventId,
} from '../../../src/domain/event.js'
import { EventIndex } from '../../../src/store/feed/event-index.js'

const A = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'
const B = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6c'

function place(offset: number, bytes = 100): { segment: number; offset: number; bytes: number } {
  return { segment: 3, offset, bytes }
}

describe('cursors', () => {
  it('are read exactly past 2^53, where a JS number rounds', () => {
    assert.equal(cursorValue('0020000000000001'), 2n ** 53n + 1n)
    assert.equal(cursorValue('ffffffffffffffff'), 2n ** 64n - 1n)
    assert.equal(formatEventId(cursorValue('0020000000000001')), '0020000000000001')
    assert.equal(formatEventId(2n ** 53n + 1n), '0020000000000001')
    assert.equal(Number.parseInt('0020000000000001', 16), 2 ** 53, 'what the old parse gave')
    for (const bad of ['', '12', 'ABCDEF0123456789', '0x00000000000001', '00000000000000001']) {
      assert.throws(() => cursorValue(bad), { name: 'RangeError', message: /not an event cursor/ })
    }
  })

  it('compare exactly, as fixed-width hex', () => {
    assert.equal(compareCursors('0020000000000000', '0020000000000001'), -1)
    assert.equal(compareCursors('0020000000000001', '0020000000000000'), 1)
    assert.equal(compareCursors('7fffffffffffffff', '7fffffffffffffff'), 0)
    assert.equal(compareCursors('0000000000000010', '000000000000000f'), 1)
    assert.throws(() => compareCursors('A', '0000000000000001'), { name: 'RangeError' })
  })

  it('bound ids kept as numbers exactly: the cursor itself up to 2^53 - 1, else 2^53 - 1', () => {
    assert.equal(cursorFloor('001fffffffffffff'), Number.MAX_SAFE_INTEGER)
    assert.equal(cursorFloor('001ffffffffffffe'), Number.MAX_SAFE_INTEGER - 1)
    assert.equal(cursorFloor('0020000000000000'), Number.MAX_SAFE_INTEGER)
    assert.equal(cursorFloor('ffffffffffffffff'), Number.MAX_SAFE_INTEGER)
    assert.equal(cursorFloor('000000000000002a'), 42)
    assert.equal(eventIdNumber('001fffffffffffff'), Number.MAX_SAFE_INTEGER)
    // Either side of the number-only parse (ids below 2^52).
    assert.equal(eventIdNumber('0000000000000001'), 1)
    assert.equal(eventIdNumber('000fffffffffffff'), 2 ** 52 - 1)
    assert.equal(eventIdNumber('0010000000000000'), 2 ** 52)
    for (const bad of ['000000000000001g', '000000000000001', '000000000000000A'])
      assert.throws(() => eventIdNumber(bad), { name: 'RangeError' })
    assert.throws(() => eventIdNumber('0020000000000000'), {
      name: 'RangeError',
      message: /past the ids/,
    })
  })
})

describe('the event index', () => {
  it('finds rows after an id, and where their bodies are', () => {
    const index = new EventIndex()
    assert.equal(index.firstAfter(0), 0)
    for (const id of [2, 3, 5, 8]) index.push(id, 'user.updated', A, place(id * 100))
    assert.equal(index.size, 4)
    assert.deepEqual(
      [0, 1, 2, 4, 5, 8, 9].map((id) => index.firstAfter(id)),
      [0, 0, 1, 2, 3, 4, 4],
    )
    assert.equal(index.idAt(2), 5)
    assert.deepEqual(index.placeAt(3), { segment: 3, offset: 800, bytes: 100 })
    assert.throws(() => index.push(8, 'user.updated', A, place(0)), {
      name: 'RangeError',
      message: /not after/,
    })
    assert.throws(() => index.push(7, 'user.updated', A, place(0)), { name: 'RangeError' })
  })

  it('filters by type and user from the index alone', () => {
    const index = new EventIndex()
    index.push(1, 'user.created', A, place(0))
    index.push(2, 'user.created', B, place(1))
    index.push(3, 'user.updated', A, place(2))
    index.push(4, 'user.deleted', B, place(3))
    const rows = (match: ((slot: number) => boolean) | undefined): number[] =>
      match === undefined
        ? []
        : [0, 1, 2, 3].filter((slot) => match(slot)).map((slot) => index.idAt(slot))
    assert.deepEqual(rows(index.matcher(undefined, undefined)), [1, 2, 3, 4])
    assert.deepEqual(rows(index.matcher(['user.created'], undefined)), [1, 2])
    assert.deepEqual(rows(index.matcher(['user.updated', 'user.deleted'], undefined)), [3, 4])
    assert.deepEqual(rows(index.matcher(undefined, B)), [2, 4])
    assert.deepEqual(rows(index.matcher(['user.created'], A)), [1])
    assert.equal(
      index.matcher(undefined, '0193a5f2-7c1e-7d3a-9b2f-000000000000'),
      undefined,
      'a user without events matches nothing',
    )
  })

  it('keeps slots through drops from the front and growth, and gives memory back after a large drop', () => {
    const index = new EventIndex()
    for (let id = 1; id <= 5000; id += 1)
      index.push(id, 'user.updated', id % 2 === 0 ? A : B, place(id, id))
    assert.equal(index.end, 5000)
    index.dropBefore(4990)
    assert.deepEqual([index.start, index.end, index.size], [4990, 5000, 10])
    assert.equal(index.idAt(4990), 4991)
    assert.equal(index.bytesAt(4999), 5000)
    assert.equal(index.firstAfter(4995), 4995)
    assert.equal(index.firstAfter(10), 4990)
    for (let id = 5001; id <= 7000; id += 1) index.push(id, 'user.created', A, place(id))
    assert.equal(index.end, 7000)
    assert.equal(index.idAt(6999), 7000)
    assert.equal(index.firstAfter(6000), 6000)
    const even = index.matcher(undefined, A)
    assert.ok(even?.(4991) === true && !even(4990))
    index.dropBefore(10_000)
    assert.deepEqual([index.start, index.end, index.size], [7000, 7000, 0])
    assert.equal(index.firstAfter(0), 7000)
  })

  it('retains only the rows asked for, in order, on a fresh index', () => {
    const index = new EventIndex()
    for (let id = 1; id <= 6; id += 1) index.push(id, 'user.updated', A, place(id * 10))
    index.retain((slot) => index.idAt(slot) % 3 !== 0)
    assert.deepEqual(
      Array.from({ length: index.size }, (_, slot) => index.idAt(slot)),
      [1, 2, 4, 5],
    )
    assert.deepEqual(index.placeAt(2), { segment: 3, offset: 40, bytes: 100 })
    index.dropBefore(1)
    assert.throws(
      () => {
        index.retain(() => true)
      },
      { message: /fresh index/ },
    )
  })
})
