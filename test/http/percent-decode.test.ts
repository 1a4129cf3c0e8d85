import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { decodePathParam, decodePathParams, percentDecode } from '../../src/http/percent-decode.js'
import { HttpError } from '../../src/http/problem.js'

describe('percentDecode', () => {
  const valid: [string, string][] = [
    ['', ''],
    ['plain-text_1.2~', 'plain-text_1.2~'],
    ['%41%42c', 'ABc'],
    ['%3A', ':'],
    ['%3a', ':'],
    ['a%2Fb', 'a/b'],
    ['%2E%2E%2F', '../'],
    ['%25', '%'],
    ['%252e', '%2e'],
    ['%00', '\u0000'],
    ['%C3%A9', 'é'],
    ['%c3%a9', 'é'],
    ['%E2%82%AC', '€'],
    ['%F0%9F%98%80', '😀'],
    ['é%20é', 'é é'],
    ['a+b', 'a+b'],
  ]
  for (const [input, output] of valid) {
    it(`decodes "${input}" to ${JSON.stringify(output)}`, () => {
      assert.equal(percentDecode(input), output)
    })
  }

  const malformed: [string, string][] = [
    ['%ZZ', 'non-hex digits'],
    ['abc%', 'a % at the end'],
    ['%4', 'one hex digit'],
    ['%G1', 'a non-hex first digit'],
    ['%%41', 'a % followed by %'],
    ['%E0%A4%A', 'a truncated escape inside a sequence'],
    ['%FF', 'a byte that never occurs in UTF-8'],
    ['%80', 'a lone continuation byte'],
    ['%C3%28', 'a lead byte without its continuation'],
    ['%C3', 'a truncated two-byte sequence'],
    ['%C0%AF', 'an overlong encoding of /'],
    ['%E0%80%AF', 'a three-byte overlong encoding'],
    ['%ED%A0%80', 'a UTF-16 surrogate'],
    ['%F4%90%80%80', 'a code point above U+10FFFF'],
  ]
  for (const [input, why] of malformed) {
    it(`returns undefined for "${input}" (${why})`, () => {
      assert.equal(percentDecode(input), undefined)
    })
  }

  it('keeps a leading byte order mark (%EF%BB%BF) as data', () => {
    assert.equal(percentDecode('%EF%BB%BFx'), '\uFEFFx')
    assert.equal(percentDecode('x%EF%BB%BF'), 'x\uFEFF')
  })

  it('turns + into a space only when asked (query strings)', () => {
    assert.equal(percentDecode('a+b%2Bc', true), 'a b+c')
    assert.equal(percentDecode('a+b', true), 'a b')
    assert.equal(percentDecode('a+b%2Bc'), 'a+b+c')
  })
})

describe('decodePathParam', () => {
  it('returns the decoded value', () => {
    assert.equal(decodePathParam('id', 'abc%3Aactivate'), 'abc:activate')
  })

  for (const raw of ['%ZZ', 'abc%', '%FF', '%C3%28', '%C0%AF', '%ED%A0%80']) {
    it(`throws a 400 bad_request naming the parameter for "${raw}"`, () => {
      assert.throws(
        () => decodePathParam('id', raw),
        (error: unknown) => {
          assert.ok(error instanceof HttpError)
          assert.equal(error.code, 'bad_request')
          assert.equal(error.status, 400)
          assert.match(error.detail, /\bid\b/)
          return true
        },
      )
    })
  }
})

describe('decodePathParams', () => {
  it('decodes every parameter in place and returns the same object', () => {
    const params = { id: 'a%3Ab', name: '%C3%A9', plain: 'x' }
    const result = decodePathParams(params)
    assert.equal(result, params)
    assert.deepEqual(result, { id: 'a:b', name: 'é', plain: 'x' })
  })

  it('throws a 400 naming the first malformed parameter', () => {
    assert.throws(
      () => decodePathParams({ ok: 'a', bad: '%FF' }),
      (error: unknown) => {
        assert.ok(error instanceof HttpError)
        assert.equal(error.status, 400)
        assert.match(error.detail, /\bbad\b/)
        return true
      },
    )
  })
})
