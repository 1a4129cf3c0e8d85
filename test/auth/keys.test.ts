import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'

import {
  createSingleKeySet,
  KeyError,
  MIN_SECRET_BYTES,
  parseKeyList,
  parseSecret,
} from '../../src/auth/keys.js'
import { TokenError, type TokenRefusal, verifyToken } from '../../src/auth/verify-token.js'
import { b64url } from '../helpers/auth-tokens.js'
import { makeToken, TEST_SECRET } from '../helpers/tokens.js'

const SECRET_A = 'rotation-secret-a-0123456789-abcdefghij'
const SECRET_B = 'rotation-secret-b-0123456789-abcdefghij'
const SECRET_C = 'rotation-secret-c-0123456789-abcdefghij'

/** Asserts a KeyError whose message names the variable and never holds the secret. */
function assertKeyError(run: () => unknown, variable: string, secret?: string): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof KeyError, `not a KeyError: ${String(error)}`)
    assert.equal(error.name, 'KeyError')
    assert.ok(
      error.message.includes(variable),
      `the message should name ${variable}: ${error.message}`,
    )
    if (secret !== undefined && secret !== '') {
      assert.ok(!error.message.includes(secret), `the message shows the secret: ${error.message}`)
    }
    return true
  })
}

describe('parseSecret', () => {
  it('takes plain text as its UTF-8 bytes', () => {
    assert.deepEqual(parseSecret(TEST_SECRET, 'JWT_SECRET'), Buffer.from(TEST_SECRET, 'utf8'))
    // 11 three-byte characters are 33 bytes: the length is counted in bytes, not characters.
    const euros = '€'.repeat(11)
    assert.deepEqual(parseSecret(euros, 'JWT_SECRET'), Buffer.from(euros, 'utf8'))
  })

  it('accepts exactly 32 bytes and refuses 31, naming the variable and never the secret', () => {
    assert.equal(MIN_SECRET_BYTES, 32)
    const exact = 'x'.repeat(32)
    assert.equal(parseSecret(exact, 'JWT_SECRET').length, 32)
    const short = 'short-secret-of-31-bytes-abcdef'
    assert.equal(Buffer.byteLength(short), 31)
    assertKeyError(() => parseSecret(short, 'JWT_SECRET'), 'JWT_SECRET', short)
    assertKeyError(() => parseSecret('€'.repeat(10), 'MY_VAR'), 'MY_VAR', '€'.repeat(10))
    assertKeyError(() => parseSecret('', 'JWT_SECRET'), 'JWT_SECRET')
  })

  it('decodes base64url: text, so that a JWK k value can be used as is', () => {
    const bytes = randomBytes(32)
    assert.deepEqual(parseSecret(`base64url:${b64url(bytes)}`, 'JWT_SECRET'), bytes)
    const long = randomBytes(64)
    assert.deepEqual(parseSecret(`base64url:${b64url(long)}`, 'JWT_SECRET'), long)
  })

  it('counts the decoded bytes of base64url: text (31 decoded bytes are refused)', () => {
    const encoded = b64url(randomBytes(31))
    // 42 characters of text, but only 31 bytes of key.
    assert.ok(`base64url:${encoded}`.length > 32)
    assertKeyError(() => parseSecret(`base64url:${encoded}`, 'JWT_SECRET'), 'JWT_SECRET', encoded)
  })

  it('refuses base64url: text that is not base64url, without showing it', () => {
    const valid = b64url(randomBytes(33))
    // 34 bytes are 46 characters whose last one has 4 spare low bits, always 0 from an encoder:
    // one of them set decodes to the same key. `${valid}A` has a character that decodes to nothing.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
    const spare = b64url(randomBytes(34))
    const spareBitSet = `${spare.slice(0, -1)}${alphabet[alphabet.indexOf(spare.at(-1) ?? '') | 1]}`
    assert.deepEqual(Buffer.from(spareBitSet, 'base64url'), Buffer.from(spare, 'base64url'))
    const invalid = ['', `${valid}=`, `${valid} x`, `+/${valid}`, `${valid}.x`, `${valid}A`]
    for (const encoded of [...invalid, spareBitSet]) {
      assertKeyError(() => parseSecret(`base64url:${encoded}`, 'JWT_SECRET'), 'JWT_SECRET', encoded)
    }
  })
})

describe('createSingleKeySet', () => {
  it('holds one key without a kid, and is not chosen by kid', () => {
    const set = createSingleKeySet(TEST_SECRET)
    assert.equal(set.byKid, false)
    assert.equal(set.keys.length, 1)
    assert.equal(set.keys[0]?.kid, undefined)
    assert.deepEqual(set.keys[0]?.secret, Buffer.from(TEST_SECRET))
    assert.ok(Object.isFrozen(set))
    assert.ok(Object.isFrozen(set.keys))
  })

  it('names JWT_SECRET (or the given name) when the secret is too short', () => {
    assertKeyError(() => createSingleKeySet('too-short'), 'JWT_SECRET', 'too-short')
    assertKeyError(
      () => createSingleKeySet('too-short', 'JWT_SECRET from /data/.jwt-secret'),
      '/data/.jwt-secret',
      'too-short',
    )
  })
})

describe('parseKeyList', () => {
  it('reads kid=secret pairs in order, trimmed, with base64url: secrets', () => {
    const bytes = randomBytes(32)
    const set = parseKeyList(` k1 = ${SECRET_A} ,k.2_-B=base64url:${b64url(bytes)}`)
    assert.equal(set.byKid, true)
    assert.deepEqual(
      set.keys.map((key) => key.kid),
      ['k1', 'k.2_-B'],
    )
    assert.deepEqual(set.keys[0]?.secret, Buffer.from(SECRET_A))
    assert.deepEqual(set.keys[1]?.secret, bytes)
  })

  it('keeps every = after the first as part of the secret', () => {
    const secret = `${SECRET_A}==x=`
    assert.deepEqual(parseKeyList(`k1=${secret}`).keys[0]?.secret, Buffer.from(secret))
  })

  it('refuses a duplicate kid', () => {
    assertKeyError(() => parseKeyList(`k1=${SECRET_A},k1=${SECRET_B}`), 'JWT_SECRETS', SECRET_B)
  })

  it('refuses a bad kid', () => {
    for (const kid of ['', ' ', 'k 1', 'k/1', 'k:1', 'ké', 'k'.repeat(65)]) {
      assertKeyError(() => parseKeyList(`${kid}=${SECRET_A}`), 'JWT_SECRETS', SECRET_A)
    }
    assert.equal(parseKeyList(`${'k'.repeat(64)}=${SECRET_A}`).keys[0]?.kid, 'k'.repeat(64))
  })

  it('refuses an entry without =', () => {
    assertKeyError(() => parseKeyList(SECRET_A), 'JWT_SECRETS', SECRET_A)
    assertKeyError(() => parseKeyList(`k1=${SECRET_A},${SECRET_B}`), 'JWT_SECRETS', SECRET_B)
    assertKeyError(() => parseKeyList(`k1=${SECRET_A},`), 'JWT_SECRETS', SECRET_A)
  })

  it('refuses a short key, naming the variable and the kid but not the secret', () => {
    const short = 'short-secret'
    assertKeyError(() => parseKeyList(`k1=${SECRET_A},k2=${short}`), 'JWT_SECRETS', short)
    assertKeyError(() => parseKeyList(`k1=${SECRET_A},k2=${short}`), 'k2', short)
    assertKeyError(() => parseKeyList(`k1=${short}`, 'secrets'), 'secrets', short)
  })
})

describe('key rotation', () => {
  const rotation = parseKeyList(`k1=${SECRET_A},k2=${SECRET_B}`)

  // The clock is read when a token is checked, not when this block is defined: the tokens carry
  // the time they are made, and a runner may define every file's tests long before it runs them.
  const reasonOf = (token: string, keys = rotation): TokenRefusal | 'accepted' => {
    try {
      verifyToken(token, { keys, leewaySeconds: 30, nowMs: Date.now() })
      return 'accepted'
    } catch (error) {
      if (error instanceof TokenError) return error.reason
      throw error
    }
  }

  it('lets the kid pick the key', () => {
    assert.equal(reasonOf(makeToken({ secret: SECRET_A, header: { kid: 'k1' } })), 'accepted')
    assert.equal(reasonOf(makeToken({ secret: SECRET_B, header: { kid: 'k2' } })), 'accepted')
  })

  it('does not fall back to the other keys when the kid names one', () => {
    assert.equal(reasonOf(makeToken({ secret: SECRET_B, header: { kid: 'k1' } })), 'bad_signature')
    assert.equal(reasonOf(makeToken({ secret: SECRET_A, header: { kid: 'k2' } })), 'bad_signature')
  })

  it('refuses an unknown kid', () => {
    assert.equal(reasonOf(makeToken({ secret: SECRET_A, header: { kid: 'k3' } })), 'unknown_kid')
  })

  it('tries each key for a token without a kid', () => {
    assert.equal(reasonOf(makeToken({ secret: SECRET_A })), 'accepted')
    assert.equal(reasonOf(makeToken({ secret: SECRET_B })), 'accepted')
    assert.equal(reasonOf(makeToken({ secret: SECRET_C })), 'bad_signature')
  })

  it('ignores the kid with a single secret', () => {
    const single = createSingleKeySet(SECRET_A)
    assert.equal(
      reasonOf(makeToken({ secret: SECRET_A, header: { kid: 'anything' } }), single),
      'accepted',
    )
    assert.equal(
      reasonOf(makeToken({ secret: SECRET_A, header: { kid: 'k2' } }), single),
      'accepted',
    )
    assert.equal(
      reasonOf(makeToken({ secret: SECRET_B, header: { kid: 'k2' } }), single),
      'bad_signature',
    )
  })
})
