import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { countCodePoints, hasLoneSurrogate, hasVisible } from '../../src/users/text-rules.js'

describe('text rules', () => {
  it('counts code points: a surrogate pair is one, a lone surrogate is one, anywhere in the text', () => {
    assert.equal(countCodePoints(''), 0)
    assert.equal(countCodePoints('abc'), 3)
    assert.equal(countCodePoints('a\u{1F600}b'), 3)
    assert.equal(countCodePoints('\u{1F600}\u{1F600}'), 2)
    assert.equal(countCodePoints('\ud800'), 1)
    assert.equal(countCodePoints('a\ud800'), 2)
    assert.equal(countCodePoints('\ud800a'), 2)
    assert.equal(countCodePoints('\udc00\ud800'), 2)
    assert.equal(countCodePoints('\udc00\udc00'), 2)
  })

  it('finds a lone surrogate in strings, keys and nested values, past nulls and numbers', () => {
    assert.equal(hasLoneSurrogate('fine \u{1F600}'), false)
    assert.equal(hasLoneSurrogate({ a: null, b: [1, true, null, 'ok'], c: { d: null } }), false)
    assert.equal(hasLoneSurrogate(null), false)
    assert.equal(hasLoneSurrogate(42), false)
    assert.equal(hasLoneSurrogate({ a: null, b: ['x', '\udc00'] }), true)
    assert.equal(hasLoneSurrogate({ 'key \ud800': 1 }), true)
    assert.equal(hasLoneSurrogate('\ud800'), true)
  })

  it('tells text with a visible character from white space and invisible marks only', () => {
    assert.equal(hasVisible(' a '), true)
    assert.equal(hasVisible(' \t\u200b\u00a0'), false)
    assert.equal(hasVisible(''), false)
  })
})
