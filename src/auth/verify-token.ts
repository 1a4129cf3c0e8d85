import { createHmac, timingSafeEqual } from 'node:crypto'

import { repeatedName } from '../domain/json-text.js'
import type { HmacKey, KeySet } from './keys.js'

/** The HMAC algorithms a token may name, and the hash behind each. */
export const HMAC_ALGORITHMS = { HS256: 'sha256', HS384: 'sha384', HS512: 'sha512' } as const
export type HmacAlgorithm = keyof typeof HMAC_ALGORITHMS

/** Why a token was refused: precise, for logs and tests; the wire only sees `code`. */
export type TokenRefusal =
  | 'malformed'
  | 'bad_header'
  | 'unsupported_alg'
  | 'unknown_kid'
  | 'bad_signature'
  | 'bad_payload'
  | 'repeated_name'
  | 'expired'
  | 'missing_exp'
  | 'not_yet_valid'
  | 'issued_in_future'
  | 'missing_sub'
  | 'bad_sub'
  | 'wrong_issuer'
  | 'wrong_audience'
  | 'bad_scope'

export class TokenError extends Error {
  override name = 'TokenError'
  readonly reason: TokenRefusal
  readonly code: 'token_invalid' | 'token_expired'

  constructor(reason: TokenRefusal) {
    super(`token refused: ${reason}`)
    this.reason = reason
    this.code = reason === 'expired' ? 'token_expired' : 'token_invalid'
  }
}

/** What a verified token says about its bearer. */
export interface TokenClaims {
  readonly sub: string
  readonly scopes: ReadonlySet<string>
  /** Seconds since the epoch. */
  readonly exp: number
  /** When the token was issued, seconds since the epoch; undefined when it does not say. */
  readonly iat?: number | undefined
}

export interface VerifyOptions {
  keys: KeySet
  issuer?: string | undefined
  audience?: string | undefined
  leewaySeconds: number
  /** Milliseconds since the epoch. */
  nowMs: number
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
const BASE64URL = /^[A-Za-z0-9_-]+$/

/**
 * Verifies a compact JWS signed with HMAC: structure, header, key, signature in constant time, and
 * only then the claims. Throws a TokenError naming the first refusal.
 */
export function verifyToken(token: string, options: VerifyOptions): TokenClaims {
  const [headerPart, payloadPart, signature] = splitToken(token)
  const header = parseHeader(headerPart)
  const signingInput = Buffer.from(`${headerPart}.${payloadPart}`, 'ascii')
  checkSignature(signingInput, signature, header, options.keys)
  const { value: payload, repeated } = decodeJsonObject(payloadPart, 'bad_payload')
  return checkClaims(payload, header.fault ?? (repeated ? 'repeated_name' : undefined), options)
}

function splitToken(token: string): [string, string, Buffer] {
  const parts = token.split('.')
  if (parts.length !== 3) throw new TokenError('malformed')
  const [header, payload, signature] = parts
  // Stryker disable next-line ConditionalExpression,LogicalOperator,BlockStatement: unreachable after the length check; it only satisfies noUncheckedIndexedAccess
  if (header === undefined || payload === undefined || signature === undefined) {
    // Stryker disable next-line StringLiteral: unreachable, as above
    throw new TokenError('malformed')
  }
  return [header, payload, decodeBase64url(signature)]
}

/** Strict base64url: no padding, no stray characters, and the canonical encoding of its bytes. */
function decodeBase64url(text: string): Buffer {
  if (!BASE64URL.test(text)) throw new TokenError('malformed')
  const bytes = Buffer.from(text, 'base64url')
  if (bytes.toString('base64url') !== text) throw new TokenError('malformed')
  return bytes
}

/**
 * A part's JSON object, and whether an object in it holds one member name twice (RFC 7515 §4 and
 * RFC 7519 §4: names are unique). JSON.parse keeps the last; another reader of the same token (a
 * gateway in front) may keep the first and see another `sub` or `scope`: such a token is refused.
 */
function decodeJsonObject(
  part: string,
  reason: TokenRefusal,
): { value: Record<string, unknown>; repeated: boolean } {
  const bytes = decodeBase64url(part)
  let text: string
  let value: unknown
  // biome-ignore format: the Stryker directive must stay on the line before `catch`
  try {
    text = utf8.decode(bytes)
    value = JSON.parse(text)
  }
  // Stryker disable next-line BlockStatement: without it value stays undefined, which the object check below refuses with the same reason
  catch {
    throw new TokenError(reason)
  }
  if (!isPlainObject(value)) throw new TokenError(reason)
  return { value, repeated: repeatedName(text) !== undefined }
}

interface Header {
  alg: HmacAlgorithm
  kid: string | undefined
  /**
   * What is wrong with a header whose signature can still be checked (a name given twice, a
   * `kid` that is not a string, `crit`): told once the signature and the expiry are, so that a
   * correctly signed token past its time is `expired` whatever else is wrong with it.
   */
  fault: TokenRefusal | undefined
}

function parseHeader(part: string): Header {
  const { value: header, repeated } = decodeJsonObject(part, 'bad_header')
  const alg = header['alg']
  if (typeof alg !== 'string' || !Object.hasOwn(HMAC_ALGORITHMS, alg)) {
    throw new TokenError('unsupported_alg')
  }
  const kid = header['kid']
  const badKid = kid !== undefined && typeof kid !== 'string'
  return {
    alg: alg as HmacAlgorithm,
    kid: typeof kid === 'string' ? kid : undefined,
    fault: repeated
      ? 'repeated_name'
      : badKid || header['crit'] !== undefined
        ? 'bad_header'
        : undefined,
  }
}

function checkSignature(input: Buffer, signature: Buffer, header: Header, keys: KeySet): void {
  const hash = HMAC_ALGORITHMS[header.alg]
  for (const key of candidateKeys(header, keys)) {
    const expected = createHmac(hash, key.secret).update(input).digest()
    // The length of an HMAC is public; only the bytes need a constant-time comparison.
    if (expected.length === signature.length && timingSafeEqual(expected, signature)) return
  }
  throw new TokenError('bad_signature')
}

function candidateKeys(header: Header, keys: KeySet): readonly HmacKey[] {
  if (!keys.byKid || header.kid === undefined) return keys.keys
  const key = keys.keys.find((candidate) => candidate.kid === header.kid)
  if (key === undefined) throw new TokenError('unknown_kid')
  return [key]
}

function checkClaims(
  payload: Record<string, unknown>,
  fault: TokenRefusal | undefined,
  options: VerifyOptions,
): TokenClaims {
  const now = options.nowMs / 1000
  const leeway = options.leewaySeconds
  const { exp, nbf, iat, sub } = payload
  // Expiry answers first: a stale token is reported as stale whatever else is wrong with it.
  if (isNumericDate(exp) && now > exp + leeway) throw new TokenError('expired')
  if (fault !== undefined) throw new TokenError(fault)
  if (!isNumericDate(exp)) throw new TokenError('missing_exp')
  if (nbf !== undefined && (!isNumericDate(nbf) || now + leeway < nbf)) {
    throw new TokenError('not_yet_valid')
  }
  if (iat !== undefined && (!isNumericDate(iat) || iat > now + leeway)) {
    throw new TokenError('issued_in_future')
  }
  if (typeof sub !== 'string' || sub === '') throw new TokenError('missing_sub')
  if (!isPrintable(sub) || !isShortEnough(sub)) throw new TokenError('bad_sub')
  if (options.issuer !== undefined && payload['iss'] !== options.issuer) {
    throw new TokenError('wrong_issuer')
  }
  if (options.audience !== undefined && !hasAudience(payload['aud'], options.audience)) {
    throw new TokenError('wrong_audience')
  }
  return {
    sub,
    exp,
    iat: isNumericDate(iat) ? iat : undefined,
    scopes: parseScopes(payload['scope']),
  }
}

// C0 (NUL included), DEL and C1 control characters, and lone surrogates (JSON's \u escapes can
// make one even from valid UTF-8).
const UNPRINTABLE = /[\u0000-\u001F\u007F-\u009F\p{Surrogate}]/u

/**
 * The longest subject, in code points: OpenID Connect's limit for `sub`. A subject keys its
 * Idempotency-Keys, and PostgreSQL refuses an index entry past about 2.7 KB: a longer subject
 * would write on the file store and fail with a 503 on PostgreSQL, so every store refuses it.
 */
export const MAX_SUBJECT_CHARS = 255

/**
 * Whether a subject may be trusted: it names the actor of every change it makes, stored as text in
 * each event (PostgreSQL's text cannot hold a NUL) and written to logs. No issuer puts control
 * characters or broken Unicode in a subject, so a token that does is not one of ours to trust.
 */
export function isPrintable(sub: string): boolean {
  return !UNPRINTABLE.test(sub)
}

/** Whether a subject fits MAX_SUBJECT_CHARS (code points; a surrogate pair is one). */
export function isShortEnough(sub: string): boolean {
  if (sub.length <= MAX_SUBJECT_CHARS) return true
  if (sub.length > MAX_SUBJECT_CHARS * 2) return false
  let count = 0
  for (const _ of sub) count += 1
  return count <= MAX_SUBJECT_CHARS
}

function hasAudience(aud: unknown, audience: string): boolean {
  if (typeof aud === 'string') return aud === audience
  return Array.isArray(aud) && aud.includes(audience)
}

function parseScopes(scope: unknown): ReadonlySet<string> {
  if (scope === undefined) return new Set()
  if (typeof scope !== 'string') throw new TokenError('bad_scope')
  return new Set(scope.split(' ').filter((item) => item !== ''))
}

function isNumericDate(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value)
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
