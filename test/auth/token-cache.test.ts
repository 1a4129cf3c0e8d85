import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import {
  type Authenticator,
  type AuthenticatorOptions,
  createAuthenticator,
  MAX_TOKEN_BYTES,
} from '../../src/auth/authenticate.js'
import { createSingleKeySet } from '../../src/auth/keys.js'
import { HttpError } from '../../src/http/problem.js'
import { makeToken, TEST_SECRET } from '../helpers/tokens.js'

const START_S = 1_900_000_000

function createTestAuthenticator(
  clock: { nowMs: number },
  overrides: Partial<AuthenticatorOptions> = {},
): Authenticator {
  return createAuthenticator({
    keys: createSingleKeySet(TEST_SECRET),
    leewaySeconds: 30,
    now: () => clock.nowMs,
    ...overrides,
  })
}

/** A correctly signed token of about `length` characters (its `pad` claim sets the size). */
function bigToken(sub: string, length: number, ttl = 600): string {
  const base = makeToken({ nowS: START_S, sub, ttl }).length
  return makeToken({
    nowS: START_S,
    sub,
    ttl,
    claims: { pad: 'p'.repeat(Math.max(0, Math.floor(((length - base - 10) * 3) / 4))) },
  })
}

/** A correctly signed token of exactly `length` characters. */
function tokenOfLength(length: number): string {
  const make = (pad: number, headerPad: number): string =>
    makeToken({
      nowS: START_S,
      claims: { pad: 'p'.repeat(pad) },
      header: { x: 'h'.repeat(headerPad) },
    })
  // Each 3 bytes of claims add 4 characters: start just below the size asked for.
  const start = Math.max(0, Math.floor(((length - make(0, 0).length) * 3) / 4) - 8)
  for (let headerPad = 0; headerPad < 3; headerPad += 1) {
    for (let pad = start; pad < start + 16; pad += 1) {
      if (make(pad, headerPad).length === length) return make(pad, headerPad)
    }
  }
  throw new Error(`no token of ${length} characters`)
}

function assertRefused(auth: Authenticator, token: string, code: string): void {
  assert.throws(
    () => auth.authenticate(token),
    (error: unknown) => error instanceof HttpError && error.code === code && error.status === 401,
  )
}

describe('tokens over MAX_TOKEN_BYTES', () => {
  it('is 8 KiB', () => {
    assert.equal(MAX_TOKEN_BYTES, 8192)
  })

  it('refuses a correctly signed token of 8,193 characters with token_invalid, without verifying it', () => {
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 })
    const over = tokenOfLength(MAX_TOKEN_BYTES + 1)
    for (let i = 0; i < 3; i += 1) assertRefused(auth, over, 'token_invalid')
    assert.deepEqual(auth.stats(), { cached: 0, cachedBytes: 0, verifications: 0 })
    const fits = tokenOfLength(MAX_TOKEN_BYTES)
    assert.equal(auth.authenticate(fits).sub, 'tester')
    assert.equal(auth.stats().verifications, 1)
  })
})

describe('the verification cache', () => {
  it('verifies a repeated token once', () => {
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 })
    const token = makeToken({ nowS: START_S, sub: 'again' })
    for (let i = 0; i < 5; i += 1) assert.equal(auth.authenticate(token).sub, 'again')
    assert.equal(auth.stats().verifications, 1)
    assert.equal(auth.stats().cached, 1)
  })

  it('keeps cachedBytes under cacheBytes through 1,000 distinct large tokens, and counts their text', () => {
    const cacheBytes = 64 * 1024
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 }, { cacheBytes })
    let largest = 0
    for (let i = 0; i < 1000; i += 1) {
      const token = bigToken(`user-${i}`, 2000)
      assert.equal(auth.authenticate(token).sub, `user-${i}`)
      const { cachedBytes, cached } = auth.stats()
      assert.ok(cachedBytes <= cacheBytes, `${cachedBytes} bytes held after ${i + 1} tokens`)
      // An estimate that left out the token text would bound nothing.
      assert.ok(
        cachedBytes >= cached * token.length,
        `${cached} tokens of ${token.length} counted as ${cachedBytes} bytes`,
      )
      largest = Math.max(largest, cached)
    }
    assert.equal(auth.stats().verifications, 1000)
    assert.ok(largest > 1 && largest < 1000, `held ${largest} tokens at most`)
  })

  it('keeps at most cacheSize tokens', () => {
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 }, { cacheSize: 10 })
    for (let i = 0; i < 100; i += 1) {
      auth.authenticate(makeToken({ nowS: START_S, sub: `s${i}` }))
      assert.ok(auth.stats().cached <= 10, `${auth.stats().cached} tokens held`)
    }
  })

  it('forgets the oldest token first: the newest is still a hit, the first is verified again', () => {
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 }, { cacheBytes: 16 * 1024 })
    const tokens = Array.from({ length: 40 }, (_, i) => bigToken(`t${i}`, 2000))
    for (const token of tokens) auth.authenticate(token)
    const verified = auth.stats().verifications
    auth.authenticate(tokens.at(-1) ?? '')
    assert.equal(auth.stats().verifications, verified, 'the newest token came from the cache')
    auth.authenticate(tokens[0] ?? '')
    assert.equal(auth.stats().verifications, verified + 1, 'the oldest token had been dropped')
  })

  it('never caches a token larger than the whole byte bound, and still accepts it', () => {
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 }, { cacheBytes: 2048 })
    const token = bigToken('huge', 4000)
    assert.ok(token.length > 2048 && token.length <= MAX_TOKEN_BYTES)
    for (let i = 0; i < 3; i += 1) assert.equal(auth.authenticate(token).sub, 'huge')
    assert.equal(auth.stats().cached, 0)
    assert.equal(auth.stats().cachedBytes, 0)
    assert.equal(auth.stats().verifications, 3)
  })

  it('holds no refused token, and gives back the bytes of one that expired', () => {
    const clock = { nowMs: START_S * 1000 }
    const auth = createTestAuthenticator(clock, { leewaySeconds: 0 })
    const forged = makeToken({ nowS: START_S, secret: 'another-secret-that-is-32-bytes-long!' })
    assertRefused(auth, forged, 'token_invalid')
    assert.equal(auth.stats().cached, 0)
    const short = bigToken('short-lived', 1500, 10)
    auth.authenticate(short)
    assert.equal(auth.stats().cached, 1)
    assert.ok(auth.stats().cachedBytes >= short.length)
    clock.nowMs = (START_S + 11) * 1000
    assertRefused(auth, short, 'token_expired')
    assert.deepEqual(
      { ...auth.stats(), verifications: 0 },
      { cached: 0, cachedBytes: 0, verifications: 0 },
    )
  })

  it('refuses an expired token on every request of a connection, giving its bytes back once', () => {
    const clock = { nowMs: START_S * 1000 }
    const auth = createTestAuthenticator(clock, { leewaySeconds: 0 })
    const kept = bigToken('kept', 1500, 600)
    const short = bigToken('short-lived', 1500, 10)
    auth.authenticate(kept)
    auth.authenticate(short)
    // The same token again: the last one used, which the authenticator compares before the Map.
    assert.equal(auth.authenticate(short).sub, 'short-lived')
    clock.nowMs = (START_S + 11) * 1000
    for (let i = 0; i < 3; i += 1) assertRefused(auth, short, 'token_expired')
    // What is left is exactly what `kept` alone holds.
    const alone = createTestAuthenticator(clock, { leewaySeconds: 0 })
    alone.authenticate(kept)
    assert.deepEqual(
      { cached: auth.stats().cached, cachedBytes: auth.stats().cachedBytes },
      { cached: 1, cachedBytes: alone.stats().cachedBytes },
    )
    assert.equal(auth.authenticate(kept).sub, 'kept')
    assert.equal(auth.stats().verifications, 2 + 3)
  })
})
