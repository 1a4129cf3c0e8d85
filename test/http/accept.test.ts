import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { preferenceFor } from '../../src/http/accept.js'

const STREAM = 'text/event-stream'

describe('preferenceFor (RFC 9110 §12.5.1)', () => {
  it('takes the weight of the most specific matching range, whatever the order', () => {
    for (const [accept, weight, named] of [
      ['text/event-stream', 1, true],
      ['*/*;q=0.9, text/*;q=0.5, text/event-stream;q=0.2', 0.2, true],
      ['text/event-stream;q=0.2, text/*;q=0.5, */*;q=0.9', 0.2, true],
      ['text/*;q=0.5, */*;q=0.9', 0.5, false],
      ['*/*;q=0.9', 0.9, false],
      ['application/json', 0, false],
      ['', 0, false],
    ] as const) {
      assert.deepEqual(preferenceFor(accept, STREAM), { weight, named }, accept)
    }
  })

  it('reads qvalues of up to three decimals, in any case and spacing, and leaves out a range with another', () => {
    for (const [accept, weight] of [
      ['text/event-stream;q=0', 0],
      ['text/event-stream; Q=0.001', 0.001],
      ['text/event-stream ;q=1.000', 1],
      ['TEXT/EVENT-STREAM;charset=utf-8;q=0.5', 0.5],
      ['text/event-stream;q=1.5', 0],
      ['text/event-stream;q=0.0001', 0],
      ['text/event-stream;q=', 0],
      ['text/event-stream;q=-1, */*;q=0.3', 0.3],
      // q=0 and q=1 without decimals are qvalues: the type's own range wins over */*.
      ['text/event-stream;q=0, */*;q=0.5', 0],
      ['text/event-stream;q=1, */*;q=0.5', 1],
      // White space before a list's comma (OWS) is no part of the value.
      ['text/event-stream;q=0.5 , */*;q=0.2', 0.5],
    ] as const) {
      assert.equal(preferenceFor(accept, STREAM).weight, weight, accept)
    }
  })

  it('reads a quoted parameter value as one value, its commas and semicolons included', () => {
    for (const [accept, weight, named] of [
      ['text/event-stream;profile="a;q=0"', 1, true],
      ['text/event-stream;profile="a,b";q=0.5', 0.5, true],
      ['text/event-stream;profile="a\\",b";q=0.5', 0.5, true],
      ['application/json;profile="x, text/event-stream", */*;q=0.2', 0.2, false],
    ] as const) {
      assert.deepEqual(preferenceFor(accept, STREAM), { weight, named }, accept)
    }
  })
})
