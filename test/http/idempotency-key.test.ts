import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { readIdempotencyKey } from '../../src/http/idempotency-key.js'
import { HttpError } from '../../src/http/problem.js'

const UUID = '8e03978e-40d5-43e8-bc93-6894a57f9324'

function assertRefused(value: string | string[], detail: RegExp): void {
  assert.throws(
    () => readIdempotencyKey(value),
    (error: unknown) => {
      assert.ok(error instanceof HttpError)
      assert.equal(error.code, 'invalid_idempotency_key')
      assert.equal(error.status, 400)
      assert.match(error.detail, /^The Idempotency-Key header /)
      assert.match(error.detail, detail)
      return true
    },
  )
}

describe('readIdempotencyKey', () => {
  it('returns undefined when the header is absent', () => {
    assert.equal(readIdempotencyKey(undefined), undefined)
    assert.equal(readIdempotencyKey([]), undefined)
  })

  describe('a String Item', () => {
    const accepted: [string, string, string][] = [
      ['a UUID', `"${UUID}"`, UUID],
      ['the String example ("hello world")', '"hello world"', 'hello world'],
      ['escaped quotes', '"foo \\"bar\\""', 'foo "bar"'],
      ['an escaped backslash', '"a\\\\b"', 'a\\b'],
      ['only escapes', '"\\"\\\\"', '"\\'],
      ['a single character', '"k"', 'k'],
      ['a single space', '" "', ' '],
      ['leading spaces', '   "k"', 'k'],
      ['trailing spaces', '"k"   ', 'k'],
      ['commas, semicolons and equals signs inside', '"a, b;c=d"', 'a, b;c=d'],
      ['single quotes inside (they delimit nothing)', `"'k'"`, "'k'"],
    ]
    for (const [name, field, key] of accepted) {
      it(`reads ${name}: ${field} is ${JSON.stringify(key)}`, () => {
        assert.equal(readIdempotencyKey(field), key)
      })
    }

    it('accepts every printable ASCII character', () => {
      let printable = ''
      for (let code = 0x20; code <= 0x7e; code += 1) printable += String.fromCharCode(code)
      const escaped = printable.replaceAll('\\', '\\\\').replaceAll('"', '\\"')
      assert.equal(readIdempotencyKey(`"${escaped}"`), printable)
    })

    it('reads one field line given as an array (headersDistinct)', () => {
      assert.equal(readIdempotencyKey([`"${UUID}"`]), UUID)
    })

    it('reads two lines that Node joined into one String as that String', () => {
      // RFC 9651's example of a String split across lines: joined with ", " it is one valid
      // String, which a parser may accept; the same lines as an array are refused below.
      assert.equal(readIdempotencyKey('"foo, bar"'), 'foo, bar')
    })
  })

  describe('the key length', () => {
    it('accepts 255 characters', () => {
      const key = 'k'.repeat(255)
      assert.equal(readIdempotencyKey(`"${key}"`), key)
    })

    it('counts characters after unescaping (253 + two escapes is 255)', () => {
      assert.equal(readIdempotencyKey(`"${'k'.repeat(253)}\\"\\\\"`), `${'k'.repeat(253)}"\\`)
    })

    it('refuses 256 characters, and more', () => {
      assertRefused(`"${'k'.repeat(256)}"`, /256 characters/)
      assertRefused(`"${'k'.repeat(255)}\\\\"`, /256 characters/)
      assertRefused(`"${'k'.repeat(1000)}"`, /1000 characters/)
    })

    it('refuses the empty String ""', () => {
      assertRefused('""', /empty String/)
      assertRefused('"";a=1', /empty String/)
    })
  })

  describe('parameters', () => {
    const withParameters: [string, string][] = [
      ['an Integer value', '"k";v=1'],
      ['a flag and a String value', '"k";a;b="x"'],
      ['the spacing of the RFC example (1; a; b=?0)', '"k"; a; b=?0'],
      ['the values of the RFC example (;q="9";r=w)', '"k";q="9";r=w'],
      ['a negative Integer and a Decimal', '"k";a=-42;b=4.5;c=-0.001'],
      ['a 15-digit Integer and a 12.3-digit Decimal', '"k";a=999999999999999;b=123456789012.123'],
      ['a String holding ; , = and escapes', '"k";a="x;y, z=\\"w\\\\"'],
      ['a Token', '"k";a=foo123/456;b=*tok:en'],
      ['a Byte Sequence (the RFC example)', '"k";a=:cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==:'],
      ['a Byte Sequence without padding, and an empty one', '"k";a=:aGVsbG8:;b=::'],
      ['Booleans', '"k";a=?1;b=?0'],
      ['a Date (the RFC example) and a negative one', '"k";a=@1659578233;b=@-1'],
      [
        'a Display String (the RFC example)',
        '"k";a=%"This is intended for display to %c3%bcsers."',
      ],
      ['keys of every allowed character', '"k";*a_b-c.d*9=1;z'],
      ['a repeated key', '"k";a=1;a=2'],
      ['spaces after the semicolons', '"k";  a=1;   b'],
      ['trailing spaces after the parameters', '"k";a=1   '],
    ]
    for (const [name, field] of withParameters) {
      it(`ignores ${name}: ${field}`, () => {
        assert.equal(readIdempotencyKey(field), 'k')
      })
    }

    const badParameters: [string, string, RegExp][] = [
      ['an uppercase key', '"k";V=1', /parameter without a valid key at character 5\./],
      ['a key starting past z', '"k";{=1', /parameter without a valid key at character 5\./],
      ['a key starting with a digit', '"k";1a=1', /parameter without a valid key/],
      ['a semicolon with no key', '"k";', /parameter without a valid key/],
      ['an equals sign with no value', '"k";a=', /unknown type/],
      ['a space before the value', '"k";a= 1', /unknown type of value at character 7\./],
      ['an Inner List as a value', '"k";a=("x")', /unknown type/],
      ['a Decimal with 4 fractional digits', '"k";a=1.2345', /fractional digits/],
      ['a Decimal ending in a dot', '"k";a=1.', /fractional digits/],
      ['an Integer of 16 digits', '"k";a=1234567890123456', /15 digits/],
      ['a Decimal of 13 integer digits', '"k";a=1234567890123.5', /12 integer digits/],
      ['a lone minus sign', '"k";a=-', /minus sign/],
      ['a Byte Sequence with a character outside base64', '"k";a=:aGVs!bG8=:', /base64/],
      ['a Byte Sequence with = before the end', '"k";a=:aG=VsbG8=:', /base64/],
      ['an unclosed Byte Sequence', '"k";a=:aGVsbG8=', /closing colon/],
      ['a Byte Sequence ending in a lone sextet', '"k";a=:aGVsb:', /not base64/],
      ['a Byte Sequence with one = too few', '"k";a=:aGVsbA=:', /not base64/],
      ['a Byte Sequence with one = too many', '"k";a=:aGVsbG8==:', /not base64/],
      ['a Boolean other than ?0 or ?1', '"k";a=?2', /Boolean/],
      ['a Date that is a Decimal', '"k";a=@1.5', /Date/],
      ['a Display String with uppercase hex', '"k";a=%"%C3%BC"', /bad % escape/],
      ['a Display String escape of one hex digit', '"k";a=%"%c"', /bad % escape/],
      ['a Display String that is not UTF-8', '"k";a=%"%c3"', /not UTF-8/],
      ['a Display String whose letter cuts a character', '"k";a=%"%c3a%bc"', /not UTF-8/],
      [
        'a tab inside a Display String',
        '"k";a=%"a\tb"',
        /Display String with a character outside printable/,
      ],
      ['an unclosed Display String', '"k";a=%"abc', /Display String without its closing quote/],
      ['a % that starts no Display String', '"k";a=%x', /Display String/],
      ['an unclosed String value', '"k";a="x', /closing quote/],
      ['a space before the semicolon', '"k" ;a=1', /text after/],
    ]
    for (const [name, field, detail] of badParameters) {
      it(`refuses ${name}: ${field}`, () => {
        assertRefused(field, detail)
      })
    }
  })

  describe('refusals', () => {
    const refused: [string, string, RegExp][] = [
      ['a bare token', 'abc', /holds a Token, not a String/],
      ['a token that looks like a UUID', UUID.replace(/^8/, 'e'), /holds a Token, not a String/],
      ['an Integer', '42', /holds an Integer, not a String/],
      ['a UUID starting with a digit (a number, then text)', UUID, /text after/],
      ['a Decimal', '4.5', /Decimal, not a String/],
      ['a Byte Sequence', ':aGVsbG8=:', /Byte Sequence, not a String/],
      ['a Boolean', '?1', /Boolean, not a String/],
      ['a Date', '@1659578233', /Date, not a String/],
      ['a Display String', '%"k"', /Display String, not a String/],
      ['an Inner List', '("a")', /Inner List/],
      ['single quotes', "'foo'", /unknown type/],
      ['a bad escape', '"a\\x"', /backslash/],
      ['an escaped letter', '"\\n"', /backslash/],
      ['a backslash before the end', '"a\\', /closing quote/],
      ['an unclosed String', '"abc', /closing quote/],
      ['a tab inside the String', '"a\tb"', /printable ASCII/],
      ['a DEL inside the String', '"a\x7fb"', /printable ASCII/],
      ['a NUL inside the String', '"a\x00b"', /printable ASCII/],
      ['a non-ASCII character', '"caf\u00e9"', /outside ASCII/],
      ['text after the Item', '"a" b', /text after/],
      ['text right after the closing quote', '"a"b', /text after its value at character 4\./],
      ['a second String right after the first', '"a""b"', /text after/],
      ['a leading tab (only spaces are discarded)', '\t"a"', /unknown type/],
      ['an empty field', '', /is empty/],
      ['a field of spaces', '   ', /is empty/],
      ['two values', '"a", "b"', /more than one value/],
      ['two values without a space', '"a","b"', /more than one value/],
      ['a repeated line joined by Node', `"${UUID}", "${UUID}"`, /more than one value/],
      ['a trailing comma', '"a",', /more than one value/],
    ]
    for (const [name, field, detail] of refused) {
      it(`refuses ${name}: ${JSON.stringify(field)}`, () => {
        assertRefused(field, detail)
      })
    }

    it('refuses two field lines (headersDistinct), even when each is a valid key', () => {
      assertRefused(['"a"', '"b"'], /more than once/)
      assertRefused([`"${UUID}"`, `"${UUID}"`], /more than once/)
      assertRefused(['"foo', 'bar"'], /more than once/)
    })

    it('refuses an invalid single line given as an array', () => {
      assertRefused(['abc'], /Token, not a String/)
      assertRefused([''], /is empty/)
    })
  })
})
