import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'

import type { TestResponse } from './http.js'
import { assertProblem } from './http.js'
import { TEST_SECRET } from './tokens.js'

/** RFC 7515 Appendix A.1: an HS256 JWS whose header holds CRLFs, and its key (the JWK `k`). */
export const RFC7515_TOKEN =
  'eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'
export const RFC7515_K =
  'AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow'
/** The example's `exp` (2011-03-22T18:43:00Z), in seconds. */
export const RFC7515_EXP = 1300819380

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
const HASHES = { HS256: 'sha256', HS384: 'sha384', HS512: 'sha512' } as const
type Alg = keyof typeof HASHES

/** base64url without padding of text (UTF-8) or bytes. */
export function b64url(value: string | Uint8Array): string {
  return Buffer.from(value).toString('base64url')
}

/**
 * A compact JWS over the header and payload parts exactly as given (already encoded), signed with
 * HMAC: for tokens whose parts are not plain JSON (bad JSON, CRLFs, padding, stray characters).
 */
export function signParts(
  headerPart: string,
  payloadPart: string,
  secret: string | Buffer = TEST_SECRET,
  alg: Alg = 'HS256',
): string {
  const input = `${headerPart}.${payloadPart}`
  return `${input}.${createHmac(HASHES[alg], secret).update(input, 'ascii').digest('base64url')}`
}

/** A token from raw header and payload text (encoded as UTF-8 as given), signed with HMAC. */
export function signText(
  headerText: string,
  payloadText: string,
  secret: string | Buffer = TEST_SECRET,
  alg: Alg = 'HS256',
): string {
  return signParts(b64url(headerText), b64url(payloadText), secret, alg)
}

/**
 * The token with the character at `index` replaced by one whose top bit differs: the decoded
 * bytes always change, and the text stays canonical base64url (a low-bit flip in the last
 * character could only touch unused bits).
 */
export function flipChar(token: string, index: number): string {
  const char = token[index]
  if (char === undefined || char === '.')
    throw new Error(`flipChar: no base64url character at ${index}`)
  const position = ALPHABET.indexOf(char)
  const replacement = ALPHABET[position ^ 32]
  if (position === -1 || replacement === undefined)
    throw new Error(`flipChar: ${char} is not base64url`)
  return `${token.slice(0, index)}${replacement}${token.slice(index + 1)}`
}

/**
 * A part whose last character differs only in the bits base64url leaves unused: it decodes to
 * the same bytes, but is not their canonical encoding.
 */
export function nonCanonical(part: string): string {
  if (part.length % 4 === 0 || part.length % 4 === 1)
    throw new Error('nonCanonical: this part has no unused bits')
  const last = part.at(-1) ?? ''
  const replacement = ALPHABET[ALPHABET.indexOf(last) ^ 1]
  if (replacement === undefined) throw new Error('nonCanonical: not base64url')
  return `${part.slice(0, -1)}${replacement}`
}

/** Indexes of every base64url character of a part of a compact token (0, 1 or 2). */
export function partIndexes(token: string, part: 0 | 1 | 2): number[] {
  const parts = token.split('.')
  let start = 0
  for (let i = 0; i < part; i += 1) start += (parts[i] ?? '').length + 1
  return Array.from({ length: (parts[part] ?? '').length }, (_, i) => start + i)
}

/** The decoded JSON of a token's header or payload part. */
export function decodePart(token: string, part: 0 | 1): Record<string, unknown> {
  const text = Buffer.from(token.split('.')[part] ?? '', 'base64url').toString('utf8')
  const value: unknown = JSON.parse(text)
  assert.ok(
    typeof value === 'object' && value !== null && !Array.isArray(value),
    `part ${part} is not an object: ${text}`,
  )
  return value as Record<string, unknown>
}

/**
 * Asserts a 401 with a code and the RFC 6750 challenge: realm="users", plus error="invalid_token"
 * exactly when a token was sent. The token itself never shows in the answer.
 */
export function assertUnauthorized(
  res: TestResponse,
  code: 'token_missing' | 'token_invalid' | 'token_expired',
  token?: string,
): void {
  assertProblem(res, 401, code)
  const challenge = res.headers.get('www-authenticate') ?? ''
  assert.match(challenge, /^Bearer realm="users"/, `WWW-Authenticate: ${challenge}`)
  if (token === undefined) {
    assert.doesNotMatch(challenge, /error=/, `WWW-Authenticate: ${challenge}`)
  } else {
    assert.match(challenge, /, error="invalid_token"/, `WWW-Authenticate: ${challenge}`)
    assert.ok(!res.text.includes(token), 'the token shows in the body')
    assert.ok(!challenge.includes(token), 'the token shows in WWW-Authenticate')
  }
  assert.equal(res.headers.get('cache-control'), 'no-store')
}

/** Asserts a 403 insufficient_scope naming the scope the route needs. */
export function assertInsufficientScope(res: TestResponse, scope: string): void {
  assertProblem(res, 403, 'insufficient_scope')
  const challenge = res.headers.get('www-authenticate') ?? ''
  assert.match(challenge, /^Bearer /, `WWW-Authenticate: ${challenge}`)
  assert.match(challenge, /, error="insufficient_scope"/, `WWW-Authenticate: ${challenge}`)
  assert.ok(
    challenge.includes(`scope="${scope}"`),
    `WWW-Authenticate should name scope="${scope}": ${challenge}`,
  )
}
