import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { splitOutsideQuotes, unquote } from '../../src/http/field-values.js'

describe('splitOutsideQuotes', () => {
  it('cuts at each delimiter outside a quoted-string, and at none inside one', () => {
    assert.deepEqual(splitOutsideQuotes('a;b', ';'), ['a', 'b'])
    assert.deepEqual(splitOutsideQuotes('a; p="x;y"; q=1', ';'), ['a', ' p="x;y"', ' q=1'])
    assert.deepEqual(splitOutsideQuotes('a;p="x\\";y";q', ';'), ['a', 'p="x\\";y"', 'q'])
    assert.deepEqual(splitOutsideQuotes('a, b;p="1,2", c', ','), ['a', ' b;p="1,2"', ' c'])
    assert.deepEqual(splitOutsideQuotes('', ','), [''])
  })

  it('opens a quoted-string only where a value starts, and cuts everywhere when one is unclosed', () => {
    assert.deepEqual(splitOutsideQuotes('a;p=b"c;d;e="f"', ';'), ['a', 'p=b"c', 'd', 'e="f"'])
    assert.deepEqual(splitOutsideQuotes('a;p=b"c;d"', ';'), ['a', 'p=b"c', 'd"'])
    assert.deepEqual(splitOutsideQuotes('a;p="open;b', ';'), ['a', 'p="open', 'b'])
    assert.deepEqual(splitOutsideQuotes('a;p="x\\";b', ';'), ['a', 'p="x\\"', 'b'])
  })
})

describe('unquote', () => {
  it('takes the quotes and quoted-pairs off a quoted-string, and leaves a token as written', () => {
    assert.equal(unquote('"UTF-8"'), 'UTF-8')
    assert.equal(unquote('"utf\\-8"'), 'utf-8')
    assert.equal(unquote('"a\\"b\\\\"'), 'a"b\\')
    assert.equal(unquote('utf-8'), 'utf-8')
    assert.equal(unquote('"'), '"')
    assert.equal(unquote('""'), '')
    assert.equal(unquote('"x'), '"x')
    assert.equal(unquote('x"'), 'x"')
  })
})
