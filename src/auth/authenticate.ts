import { HttpError } from '../errors.js'
import type { KeySet } from './keys.js'
import { TokenError, verifyToken, type TokenClaims } from './verify-token.js'

export const SCOPES = ['users:read', 'users:write', 'users:admin'] as const
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
}

/** Checks bearer tokens; verified tokens are remembered by their bytes until they expire. */
export interface Authenticator {
  /** The claims of the request's token, or a 401 HttpError. */
  authenticate(token: string | undefined): TokenClaims
}

const REALM = 'Bearer realm="users"'

export function createAuthenticator(options: AuthenticatorOptions): Authenticator {
  const cacheSize = options.cacheSize ?? 10_000
  // Map keeps insertion order, so its first key is the oldest entry: a cheap bounded cache.
  const cache = new Map<string, { claims: TokenClaims, staleAtMs: number }>()

  const verify = (token: string): TokenClaims => {
    const nowMs = options.now()
    const hit = cache.get(token)
    if (hit !== undefined && nowMs <= hit.staleAtMs) return hit.claims
    cache.delete(token)
    const claims = verifyToken(token, { ...options, nowMs })
    if (cache.size >= cacheSize) {
      const oldest = cache.keys().next()
      if (oldest.done !== true) cache.delete(oldest.value)
    }
    cache.set(token, { claims, staleAtMs: (claims.exp + options.leewaySeconds) * 1000 })
    return claims
  }

  return {
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
        const detail = error.code === 'token_expired' ? 'The token has expired.' : 'The token is not valid.'
        throw new HttpError(error.code, detail, {
          headers: { 'www-authenticate': `${REALM}, error="invalid_token", error_description="${detail}"` },
          cause: error,
        })
      }
    },
  }
}

/** Refuses a principal that lacks the scope a route needs (scopes never imply one another). */
export function requireScope(claims: TokenClaims, scope: Scope): void {
  if (claims.scopes.has(scope)) return
  throw new HttpError('insufficient_scope', `This route needs the scope ${scope}.`, {
    headers: { 'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"` },
  })
}
