import { createHmac } from 'node:crypto'

/** The secret test services use unless a test says otherwise (≥ 32 bytes). */
export const TEST_SECRET = 'test-secret-0123456789-abcdefghijklmnop'
export const ALL_SCOPES = 'users:read users:write users:admin'

const HASHES = { HS256: 'sha256', HS384: 'sha384', HS512: 'sha512' } as const
type Alg = keyof typeof HASHES

export interface TokenOptions {
  sub?: string | undefined
  /** Space-separated; null leaves the claim out. */
  scope?: string | null
  /** Seconds from now to exp. */
  ttl?: number
  /** Added or overriding claims; a claim set to undefined is left out. */
  claims?: Record<string, unknown>
  header?: Record<string, unknown>
  secret?: string | Buffer
  alg?: Alg
  /** Seconds since the epoch used for iat and exp (default: now). */
  nowS?: number
}

export const nowSeconds = (): number => Math.floor(Date.now() / 1000)

/** Signs a compact JWS with HMAC; `header` can lie about `alg` (for key-confusion tests). */
export function signJwt(
  claims: Record<string, unknown>,
  header: Record<string, unknown> = {},
  secret: string | Buffer = TEST_SECRET,
  alg: Alg = 'HS256',
): string {
  const encode = (value: unknown): string =>
    Buffer.from(JSON.stringify(dropUndefined(value))).toString('base64url')
  const input = `${encode({ alg, typ: 'JWT', ...header })}.${encode(claims)}`
  return `${input}.${createHmac(HASHES[alg], secret).update(input).digest('base64url')}`
}

/** A ready token: sub, iat, exp and (by default) all three scopes. */
export function makeToken(options: TokenOptions = {}): string {
  const now = options.nowS ?? nowSeconds()
  const claims: Record<string, unknown> = {
    sub: 'tester',
    iat: now,
    exp: now + (options.ttl ?? 300),
  }
  if ('sub' in options) claims['sub'] = options.sub
  if (options.scope !== null) claims['scope'] = options.scope ?? ALL_SCOPES
  return signJwt({ ...claims, ...options.claims }, options.header, options.secret, options.alg)
}

function dropUndefined(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value
  return Object.fromEntries(Object.entries(value).filter(([, item]) => item !== undefined))
}
