import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { createSingleKeySet, type KeySet, parseKeyList } from '../../src/auth/keys.js'
import { signToken } from '../../src/auth/sign-token.js'
import {
  type TokenClaims,
  TokenError,
  type TokenRefusal,
  type VerifyOptions,
  verifyToken,
} from '../../src/auth/verify-token.js'
import {
  b64url,
  flipChar,
  nonCanonical,
  partIndexes,
  RFC7515_EXP,
  RFC7515_K,
  RFC7515_TOKEN,
  signParts,
  signText,
} from '../helpers/auth-tokens.js'
import { makeToken, signJwt, TEST_SECRET } from '../helpers/tokens.js'

const NOW_S = 1_900_000_000
const KEYS = createSingleKeySet(TEST_SECRET)
const OTHER_SECRET = 'another-secret-that-is-also-32-bytes-long'

function options(overrides: Partial<VerifyOptions> = {}): VerifyOptions {
  return { keys: KEYS, leewaySeconds: 30, nowMs: NOW_S * 1000, ...overrides }
}

/** A token at NOW_S: sub, iat, exp (+300 s) and all scopes, with claims added or overridden. */
function token(claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}): string {
  return makeToken({ nowS: NOW_S, claims, header })
}

function verify(text: string, overrides: Partial<VerifyOptions> = {}): TokenClaims {
  return verifyToken(text, options(overrides))
}

/** Asserts that verification throws a TokenError with this reason (and the matching code). */
function assertRefused(
  text: string,
  reason: TokenRefusal,
  overrides: Partial<VerifyOptions> = {},
): void {
  assert.throws(
    () => verify(text, overrides),
    (error: unknown) => {
      assert.ok(error instanceof TokenError, `not a TokenError: ${String(error)}`)
      assert.equal(error.reason, reason, `token ${text}`)
      assert.equal(error.code, reason === 'expired' ? 'token_expired' : 'token_invalid')
      return true
    },
  )
}

function refusalOf(
  text: string,
  overrides: Partial<VerifyOptions> = {},
): TokenRefusal | 'accepted' {
  try {
    verify(text, overrides)
    return 'accepted'
  } catch (error) {
    if (error instanceof TokenError) return error.reason
    throw error
  }
}

const HEADER = b64url('{"alg":"HS256","typ":"JWT"}')
const PAYLOAD = b64url(JSON.stringify({ sub: 'tester', iat: NOW_S, exp: NOW_S + 300 }))

describe('verifyToken', () => {
  describe('accepts', () => {
    it('returns sub, exp and the scopes of a valid HS256 token', () => {
      const claims = verify(token({ scope: 'users:read  users:admin' }))
      assert.equal(claims.sub, 'tester')
      assert.equal(claims.exp, NOW_S + 300)
      assert.deepEqual([...claims.scopes].sort(), ['users:admin', 'users:read'])
    })

    for (const alg of ['HS256', 'HS384', 'HS512'] as const) {
      it(`accepts ${alg}`, () => {
        const text = makeToken({ nowS: NOW_S, alg })
        assert.equal(verify(text).sub, 'tester')
        assertRefused(makeToken({ nowS: NOW_S, alg, secret: OTHER_SECRET }), 'bad_signature')
      })
    }

    it('gives an empty scope set to a token without a scope claim', () => {
      const claims = verify(makeToken({ nowS: NOW_S, scope: null }))
      assert.equal(claims.scopes.size, 0)
    })

    it('accepts a token signed by signToken, with or without a kid', () => {
      const claims = { sub: 'signed', scope: 'users:read', iat: NOW_S, exp: NOW_S + 60 }
      const [key] = KEYS.keys
      assert.ok(key !== undefined)
      assert.equal(verify(signToken(claims, { key })).sub, 'signed')
      const list = parseKeyList(`k1=${TEST_SECRET}`)
      const [listed] = list.keys
      assert.ok(listed !== undefined)
      const signed = signToken(claims, { key: listed, alg: 'HS512' })
      assert.deepEqual(
        JSON.parse(Buffer.from(signed.split('.')[0] ?? '', 'base64url').toString()),
        { alg: 'HS512', typ: 'JWT', kid: 'k1' },
      )
      assert.equal(verify(signed, { keys: list }).sub, 'signed')
    })
  })

  describe('malformed', () => {
    const valid = token()
    const [h = '', p = '', s = ''] = valid.split('.')

    it('refuses a token that does not have three parts', () => {
      for (const text of [
        '',
        'abc',
        `${h}.${p}`,
        `${h}.${p}.${s}.${s}`,
        `${h}.${p}.${s}.`,
        '..',
        '...',
      ]) {
        assertRefused(text, 'malformed')
      }
    })

    it('refuses an empty header, payload or signature part', () => {
      assertRefused(`.${p}.${s}`, 'malformed')
      assertRefused(`${h}.${p}.`, 'malformed')
      // The payload is read only once the signature holds: sign the empty part to reach it.
      assertRefused(signParts(h, ''), 'malformed')
    })

    it('refuses padding', () => {
      const padded = `${h}=`
      assertRefused(`${padded}.${p}.${s}`, 'malformed')
      assertRefused(`${h}.${p}.${s}=`, 'malformed')
      assertRefused(signParts(h, `${p}==`), 'malformed')
    })

    it('refuses stray characters (standard base64, spaces, dots excepted)', () => {
      for (const stray of ['+', '/', ' ', '%', '*', 'é']) {
        assertRefused(`${h}${stray}.${p}.${s}`, 'malformed')
        assertRefused(`${h}.${p}.${s.slice(0, 10)}${stray}${s.slice(10)}`, 'malformed')
        assertRefused(signParts(h, `${p}${stray}`), 'malformed')
      }
    })

    it('refuses a part that is not the canonical encoding of its bytes (non-zero unused bits)', () => {
      // An HS256 signature is 32 bytes: 43 characters, the last one with 2 unused bits.
      assert.equal(s.length, 43)
      assert.deepEqual(Buffer.from(nonCanonical(s), 'base64url'), Buffer.from(s, 'base64url'))
      assertRefused(`${h}.${p}.${nonCanonical(s)}`, 'malformed')
      const header = b64url('{"alg":"HS256" }')
      assert.notEqual(header.length % 4, 0)
      assertRefused(signParts(nonCanonical(header), p), 'malformed')
      const payload = b64url(JSON.stringify({ sub: 'x', exp: NOW_S + 60 }))
      assert.notEqual(payload.length % 4, 0)
      assert.equal(verify(signParts(header, payload)).sub, 'x')
      assertRefused(signParts(header, nonCanonical(payload)), 'malformed')
    })
  })

  describe('bad_header', () => {
    it('refuses a header that is not JSON', () => {
      assertRefused(signText('{"alg":"HS256"', PAYLOAD), 'bad_header')
      assertRefused(signParts(b64url('not json'), PAYLOAD), 'bad_header')
    })

    it('refuses a header that is not UTF-8', () => {
      const bytes = Buffer.concat([
        Buffer.from('{"alg":"HS256","x":"'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('"}'),
      ])
      assertRefused(signParts(b64url(bytes), PAYLOAD), 'bad_header')
    })

    it('refuses a header that is not an object', () => {
      for (const text of ['[]', '["HS256"]', '"HS256"', 'null', '1', 'true']) {
        assertRefused(signParts(b64url(text), PAYLOAD), 'bad_header')
      }
    })

    it('refuses a kid that is not a string', () => {
      for (const kid of [1, null, ['k1'], { k: 1 }, true]) {
        assertRefused(token({}, { kid }), 'bad_header')
        assertRefused(token({}, { kid }), 'bad_header', { keys: parseKeyList(`k1=${TEST_SECRET}`) })
      }
    })

    it('refuses a header with crit', () => {
      assertRefused(token({}, { crit: ['exp'] }), 'bad_header')
      assertRefused(token({}, { crit: [] }), 'bad_header')
    })

    it('gives way to expired: a correctly signed token past its time is expired whatever its header', () => {
      const exp = NOW_S - 3600
      for (const header of [{ crit: ['x'] }, { kid: 1 }, { kid: null }]) {
        assertRefused(token({ exp }, header), 'expired')
        assertRefused(token({ exp }, header), 'expired', {
          keys: parseKeyList(`k1=${TEST_SECRET}`),
        })
      }
    })
  })

  describe('unsupported_alg', () => {
    const cases: Record<string, unknown>[] = [
      { alg: 'none' },
      { alg: 'None' },
      { alg: 'RS256' },
      { alg: 'ES256' },
      { alg: 'PS256' },
      { alg: 'EdDSA' },
      { alg: 'hs256' },
      { alg: 'HS256 ' },
      { alg: 'HS1' },
      { alg: '' },
      { alg: 256 },
      { alg: null },
      { alg: ['HS256'] },
      { alg: 'constructor' },
      { alg: '__proto__' },
      { alg: 'toString' },
      {},
    ]
    for (const header of cases) {
      it(`refuses ${JSON.stringify(header)} before any signature work`, () => {
        // A garbage (but well-formed) signature and an unknown kid: the alg answers first.
        const text = `${b64url(JSON.stringify({ typ: 'JWT', kid: 'nope', ...header }))}.${PAYLOAD}.${b64url('garbage')}`
        assertRefused(text, 'unsupported_alg')
        assertRefused(text, 'unsupported_alg', { keys: parseKeyList(`k1=${TEST_SECRET}`) })
      })
    }

    it('refuses alg none with an empty signature as malformed, and with a signature as unsupported', () => {
      const header = b64url('{"alg":"none","typ":"JWT"}')
      assertRefused(`${header}.${PAYLOAD}.`, 'malformed')
      assertRefused(signParts(header, PAYLOAD), 'unsupported_alg')
    })
  })

  describe('unknown_kid', () => {
    const keys = parseKeyList(`k1=${TEST_SECRET},k2=${OTHER_SECRET}`)

    it('refuses a kid that is not in the key list, even when another key signed it', () => {
      assertRefused(token({}, { kid: 'k3' }), 'unknown_kid', { keys })
      assertRefused(token({}, { kid: 'K1' }), 'unknown_kid', { keys })
      assertRefused(token({}, { kid: '' }), 'unknown_kid', { keys })
      assertRefused(token({}, { kid: '__proto__' }), 'unknown_kid', { keys })
    })

    it('refuses an unknown kid before looking at the signature', () => {
      const text = `${b64url('{"alg":"HS256","kid":"k9"}')}.${PAYLOAD}.${b64url('garbage')}`
      assertRefused(text, 'unknown_kid', { keys })
    })
  })

  describe('bad_signature', () => {
    it('refuses a token signed with another secret', () => {
      assertRefused(makeToken({ nowS: NOW_S, secret: OTHER_SECRET }), 'bad_signature')
    })

    it('refuses a token after any one character of its payload or signature changes', () => {
      const valid = token()
      for (const index of [...partIndexes(valid, 1), ...partIndexes(valid, 2)]) {
        assertRefused(flipChar(valid, index), 'bad_signature')
      }
    })

    it('refuses a token after any one character of its header changes (token_invalid whatever the reason)', () => {
      const valid = token()
      for (const index of partIndexes(valid, 0)) {
        const reason = refusalOf(flipChar(valid, index))
        assert.ok(
          ['bad_signature', 'bad_header', 'unsupported_alg', 'malformed'].includes(reason),
          `index ${index}: ${reason}`,
        )
      }
    })

    it('refuses a header claiming HS256 over an HS512 signature, and the reverse', () => {
      const input = `${b64url('{"alg":"HS256","typ":"JWT"}')}.${PAYLOAD}`
      const hs512 = signParts(b64url('{"alg":"HS256","typ":"JWT"}'), PAYLOAD, TEST_SECRET, 'HS512')
      assert.ok(hs512.startsWith(input))
      assertRefused(hs512, 'bad_signature')
      assertRefused(
        signJwt({ sub: 'x', exp: NOW_S + 60 }, { alg: 'HS512' }, TEST_SECRET, 'HS256'),
        'bad_signature',
      )
      assertRefused(
        signJwt({ sub: 'x', exp: NOW_S + 60 }, { alg: 'HS384' }, TEST_SECRET, 'HS512'),
        'bad_signature',
      )
    })

    it('refuses a signature cut short or lengthened', () => {
      const [h = '', p = '', s = ''] = token().split('.')
      const bytes = Buffer.from(s, 'base64url')
      assertRefused(`${h}.${p}.${b64url(bytes.subarray(0, 31))}`, 'bad_signature')
      assertRefused(
        `${h}.${p}.${b64url(Buffer.concat([bytes, Buffer.from([0])]))}`,
        'bad_signature',
      )
      assertRefused(`${h}.${p}.${b64url(Buffer.alloc(32))}`, 'bad_signature')
    })

    it('checks the signature before the claims: a forged expired token is bad_signature', () => {
      assertRefused(makeToken({ nowS: NOW_S - 10_000, secret: OTHER_SECRET }), 'bad_signature')
      assertRefused(signText('{"alg":"HS256"}', 'not json', OTHER_SECRET), 'bad_signature')
    })
  })

  describe('bad_payload', () => {
    it('refuses a signed payload that is not a JSON object', () => {
      for (const text of ['not json', '{"sub":"x"', '[]', '[{"sub":"x"}]', 'null', '"x"', '42']) {
        assertRefused(signText('{"alg":"HS256"}', text), 'bad_payload')
      }
    })

    it('refuses a signed payload that is not UTF-8', () => {
      const bytes = Buffer.concat([
        Buffer.from(`{"exp":${NOW_S + 60},"sub":"`),
        Buffer.from([0xc3, 0x28]),
        Buffer.from('"}'),
      ])
      assertRefused(signParts(HEADER, b64url(bytes)), 'bad_payload')
    })
  })

  // RFC 7515 §4 and RFC 7519 §4: another reader of the token may keep the first of two names.
  describe('repeated_name', () => {
    const claims = `"iat":${NOW_S},"exp":${NOW_S + 300}`
    it('refuses a header that names a parameter twice', () => {
      assertRefused(
        signText('{"alg":"HS256","alg":"HS256"}', `{"sub":"tester",${claims}}`),
        'repeated_name',
      )
      assertRefused(
        signText('{"alg":"HS256","kid":"a","\\u006bid":"b"}', `{"sub":"tester",${claims}}`),
        'repeated_name',
      )
    })

    it('refuses a signed payload that names a claim twice, at any depth', () => {
      for (const text of [
        `{"sub":"tester","sub":"admin",${claims}}`,
        `{"sub":"tester",${claims},"scope":"users:read","scope":"users:admin"}`,
        `{"sub":"tester",${claims},"\\u0073ub":"admin"}`,
        `{"sub":"tester",${claims},"ext":{"a":1,"a":2}}`,
      ])
        assertRefused(signText('{"alg":"HS256"}', text), 'repeated_name')
    })

    it('takes names that repeat only in other objects', () => {
      const text = `{"sub":"tester",${claims},"ext":{"sub":"x","exp":1},"more":[{"a":1},{"a":2}]}`
      assert.equal(verify(signText('{"alg":"HS256"}', text)).sub, 'tester')
    })

    it('gives way to expired', () => {
      const text = `{"sub":"tester","sub":"admin","iat":${NOW_S - 3600},"exp":${NOW_S - 3000}}`
      assertRefused(signText('{"alg":"HS256"}', text), 'expired')
    })

    it('in the header gives way to expired and to a bad signature, but is refused when current', () => {
      const header = '{"alg":"HS256","kid":"a","kid":"b"}'
      const expired = `{"sub":"tester","iat":${NOW_S - 3600},"exp":${NOW_S - 3000}}`
      assertRefused(signText(header, expired), 'expired')
      const current = `{"sub":"tester",${claims}}`
      const forged = `${signText(header, current).split('.').slice(0, 2).join('.')}.${b64url('x'.repeat(32))}`
      assertRefused(forged, 'bad_signature')
    })
  })

  describe('expired', () => {
    it('refuses a token past exp + leeway, and accepts one at exp + leeway', () => {
      assertRefused(token({ exp: NOW_S - 31 }), 'expired')
      assert.equal(verify(token({ exp: NOW_S - 30 })).sub, 'tester')
      assertRefused(token({ exp: NOW_S - 30 }), 'expired', { nowMs: NOW_S * 1000 + 1 })
    })

    it('is the answer whatever else is wrong with the claims', () => {
      const exp = NOW_S - 3600
      assertRefused(token({ exp, sub: undefined }), 'expired')
      assertRefused(token({ exp, sub: '' }), 'expired')
      assertRefused(token({ exp, iss: 'elsewhere' }), 'expired', {
        issuer: 'https://issuer.example',
      })
      assertRefused(token({ exp, aud: 'elsewhere' }), 'expired', { audience: 'users-api' })
      assertRefused(token({ exp, nbf: NOW_S + 3600 }), 'expired')
      assertRefused(token({ exp, iat: NOW_S + 3600 }), 'expired')
      assertRefused(token({ exp, scope: 42 }), 'expired')
      assertRefused(
        token({ exp, sub: undefined, iss: undefined, nbf: 'soon', scope: ['x'] }),
        'expired',
        { issuer: 'i', audience: 'a' },
      )
    })
  })

  describe('missing_exp', () => {
    it('refuses a token without a numeric exp', () => {
      for (const exp of [
        undefined,
        null,
        String(NOW_S + 60),
        true,
        [NOW_S + 60],
        { value: NOW_S + 60 },
      ]) {
        assertRefused(token({ exp }), 'missing_exp')
      }
    })

    it('refuses an exp that is not finite', () => {
      assertRefused(signText('{"alg":"HS256"}', `{"sub":"x","exp":1e400}`), 'missing_exp')
    })
  })

  describe('not_yet_valid', () => {
    it('refuses nbf beyond the leeway, and accepts it inside the leeway', () => {
      assertRefused(token({ nbf: NOW_S + 31 }), 'not_yet_valid')
      assert.equal(verify(token({ nbf: NOW_S + 30 })).sub, 'tester')
      assert.equal(verify(token({ nbf: NOW_S - 1000 })).sub, 'tester')
    })

    it('refuses an nbf that is not a number', () => {
      assertRefused(token({ nbf: String(NOW_S) }), 'not_yet_valid')
      assertRefused(token({ nbf: null }), 'not_yet_valid')
    })
  })

  describe('issued_in_future', () => {
    it('refuses iat beyond the leeway, and accepts it inside the leeway', () => {
      assertRefused(token({ iat: NOW_S + 31 }), 'issued_in_future')
      assert.equal(verify(token({ iat: NOW_S + 30 })).sub, 'tester')
      assert.equal(verify(token({ iat: undefined })).sub, 'tester')
    })

    it('refuses an iat that is not a number', () => {
      assertRefused(token({ iat: String(NOW_S) }), 'issued_in_future')
    })
  })

  describe('missing_sub', () => {
    it('refuses a token without a non-empty string sub', () => {
      for (const sub of [undefined, '', null, 42, ['tester'], { id: 'tester' }]) {
        assertRefused(token({ sub }), 'missing_sub')
      }
    })
  })

  describe('bad_sub', () => {
    it('refuses a sub holding a C0, DEL or C1 control character (NUL included) or a lone surrogate', () => {
      for (const sub of [
        '\u0000',
        'a\u0000b',
        'tab\there',
        'cr\r',
        '\u001F',
        'del\u007F',
        'c1\u0080',
        '\u009F',
        'high\uD800',
        '\uDC00low',
        '\uDBFF',
      ]) {
        assertRefused(token({ sub }), 'bad_sub')
      }
    })

    it('takes any other sub, non-ASCII and astral characters included', () => {
      for (const sub of [
        'tester',
        'svc:import',
        'Zoë Ångström',
        '\u00A0nbsp',
        'math 𝒳 \uD83D\uDE00',
        '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b',
        ' ',
      ]) {
        assert.equal(verify(token({ sub })).sub, sub)
      }
    })

    it('takes a sub of up to 255 characters (code points: an astral one counts once)', () => {
      for (const sub of ['x'.repeat(255), '😀'.repeat(255), `${'😀'.repeat(254)}x`]) {
        assert.equal(verify(token({ sub })).sub, sub)
      }
    })

    it('refuses a sub of 256 characters or more, in any mix of astral and other ones', () => {
      for (const sub of [
        'x'.repeat(256),
        '😀'.repeat(256),
        `${'😀'.repeat(255)}x`,
        'x'.repeat(600),
      ]) {
        assertRefused(token({ sub }), 'bad_sub')
      }
    })
  })

  describe('wrong_issuer and wrong_audience', () => {
    const issuer = 'https://issuer.example'
    const audience = 'users-api'

    it('requires iss to equal the configured issuer', () => {
      assert.equal(verify(token({ iss: issuer }), { issuer }).sub, 'tester')
      assertRefused(token({ iss: 'https://evil.example' }), 'wrong_issuer', { issuer })
      assertRefused(token({ iss: `${issuer}/` }), 'wrong_issuer', { issuer })
      assertRefused(token(), 'wrong_issuer', { issuer })
      assertRefused(token({ iss: [issuer] }), 'wrong_issuer', { issuer })
    })

    it('ignores iss and aud when none is configured', () => {
      assert.equal(verify(token({ iss: 'anyone', aud: ['anything'] })).sub, 'tester')
    })

    it('requires aud (a string or an array) to hold the configured audience', () => {
      assert.equal(verify(token({ aud: audience }), { audience }).sub, 'tester')
      assert.equal(verify(token({ aud: ['other', audience] }), { audience }).sub, 'tester')
      assertRefused(token({ aud: 'other' }), 'wrong_audience', { audience })
      assertRefused(token({ aud: ['other'] }), 'wrong_audience', { audience })
      assertRefused(token({ aud: [] }), 'wrong_audience', { audience })
      assertRefused(token(), 'wrong_audience', { audience })
      assertRefused(token({ aud: { [audience]: true } }), 'wrong_audience', { audience })
      assertRefused(token({ aud: `${audience} other` }), 'wrong_audience', { audience })
    })

    it('checks the issuer before the audience', () => {
      assertRefused(token({ iss: 'x', aud: 'y' }), 'wrong_issuer', { issuer, audience })
      assert.equal(
        verify(token({ iss: issuer, aud: [audience] }), { issuer, audience }).sub,
        'tester',
      )
    })
  })

  describe('bad_scope', () => {
    it('refuses a scope claim that is not a string', () => {
      for (const scope of [42, ['users:read'], { read: true }, true, null]) {
        assertRefused(token({ scope }), 'bad_scope')
      }
    })
  })

  describe('leeway', () => {
    it('allows no slack with leeway 0', () => {
      const leewaySeconds = 0
      assertRefused(token({ exp: NOW_S - 1 }), 'expired', { leewaySeconds })
      assert.equal(verify(token({ exp: NOW_S }), { leewaySeconds }).sub, 'tester')
      assertRefused(token({ nbf: NOW_S + 1 }), 'not_yet_valid', { leewaySeconds })
      assert.equal(verify(token({ nbf: NOW_S }), { leewaySeconds }).sub, 'tester')
      assertRefused(token({ iat: NOW_S + 1 }), 'issued_in_future', { leewaySeconds })
    })

    it('allows 30 s of slack each way with leeway 30', () => {
      const leewaySeconds = 30
      assert.equal(verify(token({ exp: NOW_S - 1 }), { leewaySeconds }).sub, 'tester')
      assert.equal(verify(token({ nbf: NOW_S + 1 }), { leewaySeconds }).sub, 'tester')
      assert.equal(verify(token({ iat: NOW_S + 1 }), { leewaySeconds }).sub, 'tester')
      assertRefused(token({ exp: NOW_S - 31 }), 'expired', { leewaySeconds })
    })
  })

  describe('TokenError', () => {
    it('maps expired to token_expired and every other reason to token_invalid', () => {
      const reasons: TokenRefusal[] = [
        'malformed',
        'bad_header',
        'unsupported_alg',
        'unknown_kid',
        'bad_signature',
        'bad_payload',
        'repeated_name',
        'missing_exp',
        'not_yet_valid',
        'issued_in_future',
        'missing_sub',
        'bad_sub',
        'wrong_issuer',
        'wrong_audience',
        'bad_scope',
      ]
      for (const reason of reasons) {
        const error = new TokenError(reason)
        assert.equal(error.reason, reason)
        assert.equal(error.code, 'token_invalid')
      }
      assert.equal(new TokenError('expired').code, 'token_expired')
    })
  })

  describe('the RFC 7515 Appendix A.1 example', () => {
    const keys: KeySet = createSingleKeySet(`base64url:${RFC7515_K}`)

    it('has a header with CRLFs, which the signature covers as received', () => {
      const headerText = Buffer.from(RFC7515_TOKEN.split('.')[0] ?? '', 'base64url').toString(
        'utf8',
      )
      assert.ok(headerText.includes('\r\n'), JSON.stringify(headerText))
      // The same header re-encoded without the CRLFs no longer matches the signature.
      const [, p = '', s = ''] = RFC7515_TOKEN.split('.')
      const compact = b64url(JSON.stringify(JSON.parse(headerText)))
      assertRefused(`${compact}.${p}.${s}`, 'bad_signature', { keys, nowMs: 1_300_819_000_000 })
    })

    it('is expired with the real clock (exp 1300819380, in 2011)', () => {
      assertRefused(RFC7515_TOKEN, 'expired', { keys, nowMs: Date.now() })
      assertRefused(RFC7515_TOKEN, 'expired', { keys, nowMs: (RFC7515_EXP + 31) * 1000 })
    })

    it('passes the signature and the times before its exp, and is refused only for its missing sub', () => {
      assertRefused(RFC7515_TOKEN, 'missing_sub', { keys, nowMs: 1_300_819_000_000 })
      assertRefused(RFC7515_TOKEN, 'missing_sub', { keys, nowMs: (RFC7515_EXP + 30) * 1000 })
    })

    it('is not signed by the key text itself (the base64url: prefix decodes the key)', () => {
      assertRefused(RFC7515_TOKEN, 'bad_signature', {
        keys: createSingleKeySet(RFC7515_K),
        nowMs: 1_300_819_000_000,
      })
    })

    it('is token_invalid after any one character changes, in each part', () => {
      for (const part of [0, 1, 2] as const) {
        for (const index of partIndexes(RFC7515_TOKEN, part)) {
          const reason = refusalOf(flipChar(RFC7515_TOKEN, index), {
            keys,
            nowMs: 1_300_819_000_000,
          })
          assert.notEqual(reason, 'accepted', `index ${index}`)
          assert.notEqual(reason, 'expired', `index ${index}`)
          assert.notEqual(reason, 'missing_sub', `index ${index}: the change went unnoticed`)
          if (part > 0) assert.equal(reason, 'bad_signature', `index ${index}`)
        }
      }
    })
  })
})

describe('verifyToken: byte order marks', () => {
  const payload = JSON.stringify({ sub: 'tester', iat: NOW_S, exp: NOW_S + 300 })

  it('refuses a header that starts with a UTF-8 BOM as bad_header', () => {
    const text = signText('\uFEFF{"alg":"HS256","typ":"JWT"}', payload)
    assertRefused(text, 'bad_header')
  })

  it('refuses a payload that starts with a UTF-8 BOM as bad_payload', () => {
    const text = signText('{"alg":"HS256","typ":"JWT"}', `\uFEFF${payload}`)
    assertRefused(text, 'bad_payload')
  })

  it('accepts the same token without the BOM (the BOM alone is the fault)', () => {
    assert.equal(verify(signText('{"alg":"HS256","typ":"JWT"}', payload)).sub, 'tester')
  })
})

describe('verifyToken: a kid with a single secret', () => {
  it('ignores any kid when keys are not looked up by kid (JWT_SECRET)', () => {
    assert.equal(verify(token({}, { kid: 'whatever' })).sub, 'tester')
  })

  it('tries every key of a list for a token without a kid', () => {
    const keys = parseKeyList(`k1=${OTHER_SECRET},k2=${TEST_SECRET}`)
    assert.equal(verify(token(), { keys }).sub, 'tester')
  })

  it('still looks the kid up with a key list', () => {
    assertRefused(token({}, { kid: 'whatever' }), 'unknown_kid', {
      keys: parseKeyList(`k1=${TEST_SECRET}`),
    })
  })
})

describe('TokenError', () => {
  it('is named TokenError and says the reason in its message', () => {
    const error = new TokenError('malformed')
    assert.equal(error.name, 'TokenError')
    assert.equal(error.message, 'token refused: malformed')
    assert.equal(error.code, 'token_invalid')
    assert.equal(new TokenError('expired').code, 'token_expired')
  })
})
