import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import {
  type Authenticator,
  type AuthenticatorOptions,
  admitSubject,
  createAuthenticator,
  MAX_TOKEN_BYTES,
  requireScope,
  SCOPES,
} from '../../src/auth/authenticate.js'
import { createSingleKeySet } from '../../src/auth/keys.js'
import { type TokenClaims, TokenError } from '../../src/auth/verify-token.js'
import { ServiceError } from '../../src/domain/errors.js'
import { HttpError } from '../../src/http/problem.js'
import { makeToken, TEST_SECRET } from '../helpers/tokens.js'

const START_S = 1_900_000_000

interface Clock {
  nowMs: number
}

function createTestAuthenticator(
  clock: Clock,
  overrides: Partial<AuthenticatorOptions> = {},
): Authenticator {
  return createAuthenticator({
    keys: createSingleKeySet(TEST_SECRET),
    leewaySeconds: 30,
    now: () => clock.nowMs,
    ...overrides,
  })
}

/** Asserts an HttpError with a code and status; returns it. */
function assertHttpError(run: () => unknown, code: string, status: number): HttpError {
  let caught: unknown
  assert.throws(run, (error: unknown) => {
    caught = error
    return true
  })
  assert.ok(caught instanceof HttpError, `not an HttpError: ${String(caught)}`)
  assert.equal(caught.code, code)
  assert.equal(caught.status, status)
  return caught
}

/** A 401 of a token that was given: its detail, said again in the challenge. */
function assertInvalidToken(error: HttpError, detail: string): void {
  assert.equal(error.detail, detail)
  assert.equal(
    error.headers['www-authenticate'],
    `Bearer realm="users", error="invalid_token", error_description="${detail}"`,
  )
}

describe('createAuthenticator', () => {
  it('returns the claims of a valid token', () => {
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 })
    const claims = auth.authenticate(
      makeToken({ nowS: START_S, sub: 'alice', scope: 'users:read' }),
    )
    assert.equal(claims.sub, 'alice')
    assert.deepEqual([...claims.scopes], ['users:read'])
  })

  it('refuses no token with token_missing and a bare challenge', () => {
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 })
    const error = assertHttpError(() => auth.authenticate(undefined), 'token_missing', 401)
    assert.deepEqual(error.headers, { 'www-authenticate': 'Bearer realm="users"' })
  })

  it('refuses a bad token with token_invalid, error="invalid_token" and the reason kept as the cause', () => {
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 })
    const token = makeToken({ nowS: START_S, secret: 'some-other-secret-of-at-least-32-bytes' })
    const error = assertHttpError(() => auth.authenticate(token), 'token_invalid', 401)
    assert.match(
      error.headers['www-authenticate'] ?? '',
      /^Bearer realm="users", error="invalid_token"/,
    )
    assert.ok(error.cause instanceof TokenError)
    assert.equal(error.cause.reason, 'bad_signature')
    assert.ok(!error.detail.includes(token))
  })

  it('refuses an expired token with token_expired and error="invalid_token"', () => {
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 })
    const error = assertHttpError(
      () => auth.authenticate(makeToken({ nowS: START_S - 1000, ttl: 60 })),
      'token_expired',
      401,
    )
    assert.match(
      error.headers['www-authenticate'] ?? '',
      /^Bearer realm="users", error="invalid_token"/,
    )
  })

  it('passes the issuer, audience and leeway on to verification', () => {
    const clock = { nowMs: START_S * 1000 }
    const auth = createTestAuthenticator(clock, {
      issuer: 'iss',
      audience: 'aud',
      leewaySeconds: 0,
    })
    const tokenWith = (claims: Record<string, unknown>, nowS = START_S): string =>
      makeToken({ nowS, ttl: 60, claims })
    assert.equal(auth.authenticate(tokenWith({ iss: 'iss', aud: 'aud' })).sub, 'tester')
    const wrongIssuer = assertHttpError(
      () => auth.authenticate(tokenWith({ iss: 'x', aud: 'aud' })),
      'token_invalid',
      401,
    )
    assert.ok(
      wrongIssuer.cause instanceof TokenError && wrongIssuer.cause.reason === 'wrong_issuer',
    )
    const wrongAudience = assertHttpError(
      () => auth.authenticate(tokenWith({ iss: 'iss', aud: 'x' })),
      'token_invalid',
      401,
    )
    assert.ok(
      wrongAudience.cause instanceof TokenError && wrongAudience.cause.reason === 'wrong_audience',
    )
    assertHttpError(
      () => auth.authenticate(tokenWith({ iss: 'iss', aud: 'aud' }, START_S - 61)),
      'token_expired',
      401,
    )
  })

  describe('the verification cache', () => {
    it('answers the same token twice with the same claims', () => {
      const auth = createTestAuthenticator({ nowMs: START_S * 1000 })
      const token = makeToken({ nowS: START_S, scope: 'users:write' })
      const first = auth.authenticate(token)
      const second = auth.authenticate(token)
      assert.deepEqual(second, first)
      assert.deepEqual([...second.scopes], ['users:write'])
    })

    it('refuses a cached token once its exp + leeway has passed', () => {
      const clock = { nowMs: START_S * 1000 }
      const auth = createTestAuthenticator(clock)
      const token = makeToken({ nowS: START_S, ttl: 60 })
      assert.equal(auth.authenticate(token).exp, START_S + 60)
      clock.nowMs = (START_S + 60 + 30) * 1000
      assert.equal(auth.authenticate(token).sub, 'tester')
      clock.nowMs += 1
      assertHttpError(() => auth.authenticate(token), 'token_expired', 401)
      assertHttpError(() => auth.authenticate(token), 'token_expired', 401)
    })

    it('uses the leeway of its options for cached tokens', () => {
      const clock = { nowMs: START_S * 1000 }
      const auth = createTestAuthenticator(clock, { leewaySeconds: 0 })
      const token = makeToken({ nowS: START_S, ttl: 10 })
      auth.authenticate(token)
      clock.nowMs = (START_S + 10) * 1000 + 1
      assertHttpError(() => auth.authenticate(token), 'token_expired', 401)
    })

    it('never remembers a refused token: one not yet valid is accepted once its nbf comes', () => {
      const clock = { nowMs: START_S * 1000 }
      const auth = createTestAuthenticator(clock, { leewaySeconds: 0 })
      const token = makeToken({ nowS: START_S, ttl: 600, claims: { nbf: START_S + 100 } })
      assertHttpError(() => auth.authenticate(token), 'token_invalid', 401)
      assertHttpError(() => auth.authenticate(token), 'token_invalid', 401)
      clock.nowMs = (START_S + 100) * 1000
      assert.equal(auth.authenticate(token).sub, 'tester')
    })

    it('keeps working when more tokens are seen than it holds', () => {
      const clock = { nowMs: START_S * 1000 }
      const auth = createTestAuthenticator(clock, { cacheSize: 2 })
      const tokens = ['a', 'b', 'c', 'd'].map((sub) => makeToken({ nowS: START_S, sub, ttl: 60 }))
      for (let round = 0; round < 3; round += 1) {
        tokens.forEach((token, i) => {
          assert.equal(auth.authenticate(token).sub, ['a', 'b', 'c', 'd'][i])
        })
      }
      // Never more than its size: four tokens taken in turn through two places all miss.
      const { cached, verifications } = auth.stats()
      assert.deepEqual({ cached, verifications }, { cached: 2, verifications: 12 })
      clock.nowMs = (START_S + 91) * 1000
      for (const token of tokens)
        assertHttpError(() => auth.authenticate(token), 'token_expired', 401)
    })
  })
})

describe('requireScope', () => {
  const claimsWith = (scope: string): TokenClaims => ({
    sub: 'x',
    exp: START_S,
    scopes: new Set(scope.split(' ').filter(Boolean)),
  })

  it('lets a token with the scope pass', () => {
    for (const scope of SCOPES) requireScope(claimsWith(scope), scope)
    for (const scope of SCOPES) requireScope(claimsWith(SCOPES.join(' ')), scope)
    assert.deepEqual(
      [...SCOPES],
      ['users:read', 'users:write', 'users:admin', 'events:read', 'webhooks:admin'],
    )
  })

  it('refuses a missing scope with 403 insufficient_scope naming the scope; no scope implies another', () => {
    for (const needed of SCOPES) {
      for (const held of SCOPES) {
        if (held === needed) continue
        const error = assertHttpError(
          () => {
            requireScope(claimsWith(held), needed)
          },
          'insufficient_scope',
          403,
        )
        assert.equal(
          error.headers['www-authenticate'],
          `Bearer realm="users", error="insufficient_scope", scope="${needed}"`,
        )
        assert.equal(error.detail, `This route needs the scope ${needed}.`)
      }
      assertHttpError(
        () => {
          requireScope(claimsWith(''), needed)
        },
        'insufficient_scope',
        403,
      )
      assertHttpError(
        () => {
          requireScope(claimsWith(needed.toUpperCase()), needed)
        },
        'insufficient_scope',
        403,
      )
    }
  })
})

describe('what the authenticator says when it refuses', () => {
  it('says a token expired or is not valid, in the detail and in the challenge', () => {
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 })
    const expired = assertHttpError(
      () => auth.authenticate(makeToken({ nowS: START_S - 1000, ttl: 60 })),
      'token_expired',
      401,
    )
    assertInvalidToken(expired, 'The token has expired.')
    const invalid = assertHttpError(() => auth.authenticate('not.a.token'), 'token_invalid', 401)
    assertInvalidToken(invalid, 'The token is not valid.')
    const missing = assertHttpError(() => auth.authenticate(undefined), 'token_missing', 401)
    assert.equal(missing.detail, 'This route needs a bearer token.')
  })

  it('refuses a token over 8 KiB as malformed, without checking its signature', () => {
    const auth = createTestAuthenticator({ nowMs: START_S * 1000 })
    const long = makeToken({ nowS: START_S, claims: { pad: 'x'.repeat(MAX_TOKEN_BYTES) } })
    const error = assertHttpError(() => auth.authenticate(long), 'token_invalid', 401)
    assert.ok(error.cause instanceof TokenError)
    assert.equal(error.cause.reason, 'malformed')
    assert.equal(auth.stats().verifications, 0)
  })

  it('lets a fault that is no refusal of the token through as it is', () => {
    const fault = new Error('the clock is broken')
    const auth = createTestAuthenticator(
      { nowMs: 0 },
      {
        now: () => {
          throw fault
        },
      },
    )
    assert.throws(
      () => auth.authenticate(makeToken({ nowS: START_S })),
      (error) => error === fault,
    )
  })
})

describe('the verification cache, counted', () => {
  it('answers a token from the cache until exp + leeway, the last millisecond included', () => {
    const clock = { nowMs: START_S * 1000 }
    const auth = createTestAuthenticator(clock)
    const token = makeToken({ nowS: START_S, ttl: 60 })
    auth.authenticate(token)
    // Past exp, within the leeway: still the cache's, not checked again.
    clock.nowMs = (START_S + 60 + 1) * 1000
    auth.authenticate(token)
    clock.nowMs = (START_S + 60 + 30) * 1000
    auth.authenticate(token)
    assert.equal(auth.stats().verifications, 1)
  })

  it('counts an entry as its token, its subject and a fixed overhead, and keeps one that fills it exactly', () => {
    const token = makeToken({ nowS: START_S, sub: 'a-subject', ttl: 60 })
    const bytes = token.length + 'a-subject'.length + 256
    const exact = createTestAuthenticator({ nowMs: START_S * 1000 }, { cacheBytes: bytes })
    exact.authenticate(token)
    assert.deepEqual(
      { cached: exact.stats().cached, cachedBytes: exact.stats().cachedBytes },
      { cached: 1, cachedBytes: bytes },
    )
    const short = createTestAuthenticator({ nowMs: START_S * 1000 }, { cacheBytes: bytes - 1 })
    short.authenticate(token)
    assert.equal(short.stats().cached, 0)
  })

  it('keeps two entries that fill it exactly, and drops the oldest for a third', () => {
    const tokens = ['aa', 'bb', 'cc'].map((sub) => makeToken({ nowS: START_S, sub, ttl: 60 }))
    const bytesOf = (token: string): number => token.length + 2 + 256
    const auth = createTestAuthenticator(
      { nowMs: START_S * 1000 },
      { cacheBytes: bytesOf(tokens[0] ?? '') + bytesOf(tokens[1] ?? '') },
    )
    for (const token of tokens.slice(0, 2)) auth.authenticate(token)
    assert.equal(auth.stats().cached, 2)
    auth.authenticate(tokens[2] ?? '')
    assert.equal(auth.stats().cached, 2)
    // The first token was dropped: it is checked again; the third is still the cache's.
    auth.authenticate(tokens[2] ?? '')
    assert.equal(auth.stats().verifications, 3)
    auth.authenticate(tokens[0] ?? '')
    assert.equal(auth.stats().verifications, 4)
  })
})

describe('admitSubject', () => {
  const claims: TokenClaims = { sub: 'x', exp: START_S, scopes: new Set(['users:read']) }
  const revoked = new ServiceError('token_revoked', 'revoked')
  const suspended = new ServiceError('subject_suspended', 'suspended')

  it('lets a token with the scope and an unrefused subject pass', () => {
    assert.equal(admitSubject(claims, 'users:read', undefined), undefined)
  })

  it('refuses a revoked token with 401 token_revoked, before the scope is checked', () => {
    for (const scope of ['users:read', 'users:admin'] as const) {
      const error = assertHttpError(
        () => admitSubject(claims, scope, revoked),
        'token_revoked',
        401,
      )
      assertInvalidToken(error, 'The token was revoked.')
      assert.equal(error.cause, revoked)
    }
  })

  it("checks the scope before the subject's other refusals, and then throws the refusal itself", () => {
    assertHttpError(() => admitSubject(claims, 'users:admin', suspended), 'insufficient_scope', 403)
    assert.throws(
      () => admitSubject(claims, 'users:read', suspended),
      (error) => error === suspended,
    )
  })
})
