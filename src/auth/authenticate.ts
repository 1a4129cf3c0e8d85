import { ServiceError } from '../domain/errors.js'
import { HttpError } from '../http/problem.js'
import type { KeySet } from './keys.js'
import { type TokenClaims, TokenError, verifyToken } from './verify-token.js'

export const SCOPES = [
  'users:read',
  'users:write',
  'users:admin',
  'events:read',
  'webhooks:admin',
] as const
export type Scope = (typeof SCOPES)[number]

export interface AuthenticatorOptions {
  keys: KeySet
  issuer?: string | undefined
  audience?: string | undefined
  leewaySeconds: number
  /** Milliseconds since the epoch. */
  now: () => number
  /** How many verified tokens to remember (default 10,000). */
  cacheSize?: number
  /** How many bytes of tokens and claims the cache may hold (default 8 MiB). */
  cacheBytes?: number
}

/** What the authenticator has done: for /metrics and for tests that must see the cache work. */
export interface AuthenticatorStats {
  /** Tokens held in the cache, and an estimate of their bytes. */
  readonly cached: number
  readonly cachedBytes: number
  /** Signature checks run (cache misses that got as far as verification). */
  readonly verifications: number
}

/** Checks bearer tokens; verified tokens are remembered by their bytes until they expire. */
export interface Authenticator {
  /** The claims of the request's token, or a 401 HttpError. */
  authenticate(token: string | undefined): TokenClaims
  stats(): AuthenticatorStats
}

/** Longer bearer tokens are refused before any work (docs/api.md, limits): real HMAC JWTs are a few hundred bytes. */
export const MAX_TOKEN_BYTES = 8 * 1024
const REALM = 'Bearer realm="users"'
/** What a cache entry costs besides the token text: the claims, the scope set, the map entry. */
const ENTRY_OVERHEAD_BYTES = 256

interface CacheEntry {
  readonly claims: TokenClaims
  readonly staleAtMs: number
  readonly bytes: number
}

export function createAuthenticator(options: AuthenticatorOptions): Authenticator {
  const cacheSize = options.cacheSize ?? 10_000
  const cacheBytes = options.cacheBytes ?? 8 * 1024 * 1024
  // Map keeps insertion order, so its first key is the oldest entry: a cheap bounded cache.
  const cache = new Map<string, CacheEntry>()
  let bytes = 0
  let verifications = 0

  const forget = (token: string, entry: CacheEntry): void => {
    cache.delete(token)
    bytes -= entry.bytes
  }

  const remember = (token: string, claims: TokenClaims): void => {
    const entry = {
      claims,
      staleAtMs: (claims.exp + options.leewaySeconds) * 1000,
      bytes: token.length + claims.sub.length + ENTRY_OVERHEAD_BYTES,
    }
    if (entry.bytes > cacheBytes) return
    for (const [oldest, old] of cache) {
      if (cache.size < cacheSize && bytes + entry.bytes <= cacheBytes) break
      forget(oldest, old)
    }
    cache.set(token, entry)
    bytes += entry.bytes
  }

  const verify = (token: string): TokenClaims => {
    const nowMs = options.now()
    const hit = cache.get(token)
    if (hit !== undefined) {
      if (nowMs <= hit.staleAtMs) return hit.claims
      forget(token, hit)
    }
    // The length is public and a long token is no valid token of ours: no HMAC work for it.
    if (token.length > MAX_TOKEN_BYTES) throw new TokenError('malformed')
    verifications += 1
    const claims = withKnownScopes(verifyToken(token, { ...options, nowMs }))
    remember(token, claims)
    return claims
  }

  return {
    stats: () => ({ cached: cache.size, cachedBytes: bytes, verifications }),
    authenticate(token) {
      if (token === undefined) {
        throw new HttpError('token_missing', 'This route needs a bearer token.', {
          headers: { 'www-authenticate': REALM },
        })
      }
      try {
        return verify(token)
      } catch (error) {
        if (!(error instanceof TokenError)) throw error
        const detail =
          error.code === 'token_expired' ? 'The token has expired.' : 'The token is not valid.'
        throw new HttpError(error.code, detail, {
          headers: {
            'www-authenticate': `${REALM}, error="invalid_token", error_description="${detail}"`,
          },
          cause: error,
        })
      }
    },
  }
}

/**
 * The claims with only the scopes a route can ask for. The cache counts an entry by its token's
 * text; a set of the thousands of other scopes a token may name costs several times that text.
 */
function withKnownScopes(claims: TokenClaims): TokenClaims {
  return { ...claims, scopes: new Set(SCOPES.filter((scope) => claims.scopes.has(scope))) }
}

/**
 * The 401 of a token its subject's revocation refuses (docs/api.md, revoking tokens): a token
 * error like an expired one, so it carries the same challenge.
 */
function revokedToken(cause: Error): HttpError {
  const detail = 'The token was revoked.'
  return new HttpError('token_revoked', detail, {
    headers: {
      'www-authenticate': `${REALM}, error="invalid_token", error_description="${detail}"`,
    },
    cause,
  })
}

/**
 * The scope check of a token whose subject was looked up, with what the lookup refused: a revoked
 * token is a 401, which comes before the scope's 403; the subject's own 403s come after it.
 */
export function admitSubject(claims: TokenClaims, scope: Scope, refusal: Error | undefined): void {
  if (refusal instanceof ServiceError && refusal.code === 'token_revoked')
    throw revokedToken(refusal)
  requireScope(claims, scope)
  if (refusal !== undefined) throw refusal
}

/** Refuses a principal that lacks the scope a route needs (scopes never imply one another). */
export function requireScope(claims: TokenClaims, scope: Scope): void {
  if (claims.scopes.has(scope)) return
  throw new HttpError('insufficient_scope', `This route needs the scope ${scope}.`, {
    headers: { 'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"` },
  })
}
