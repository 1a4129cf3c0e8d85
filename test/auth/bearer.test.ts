import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { readBearerToken } from '../../src/auth/bearer.js'

describe('readBearerToken', () => {
  it('returns the token of a Bearer header', () => {
    assert.equal(readBearerToken('Bearer abc.def.ghi'), 'abc.def.ghi')
  })

  it('reads the scheme case-insensitively (RFC 9110 §11.1)', () => {
    assert.equal(readBearerToken('bearer abc'), 'abc')
    assert.equal(readBearerToken('BEARER abc'), 'abc')
    assert.equal(readBearerToken('bEaReR abc'), 'abc')
  })

  it('allows spaces and tabs around the token', () => {
    assert.equal(readBearerToken('Bearer    abc'), 'abc')
    assert.equal(readBearerToken('Bearer\tabc'), 'abc')
    assert.equal(readBearerToken('  Bearer abc  '), 'abc')
  })

  it('finds no token without a header, with another scheme, or with an empty bearer token', () => {
    const headers = [
      undefined,
      '',
      '   ',
      'Basic dXNlcjpwYXNz',
      'Token abc',
      // Six letters and a space, as Bearer has: the scheme itself must be Bearer.
      'Digest abc',
      'Beaver abc',
      'Bearer',
      'Bearer ',
      'Bearer \t ',
      'bearer',
      'Bearerabc',
      'Bearer:abc',
      'abc.def.ghi',
    ]
    for (const header of headers) {
      assert.equal(readBearerToken(header), undefined, JSON.stringify(header))
    }
  })

  it('returns anything after the scheme as sent, so that a bad token is invalid rather than missing', () => {
    assert.equal(readBearerToken('Bearer a b'), 'a b')
    assert.equal(readBearerToken('Bearer abc,def'), 'abc,def')
    assert.equal(readBearerToken('Bearer Bearer abc'), 'Bearer abc')
    assert.equal(readBearerToken('Bearer ==='), '===')
  })
})
