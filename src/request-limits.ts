import type { IncomingMessage } from 'node:http'

import type { Authenticator } from './auth/authenticate.js'
import { readBearerToken } from './auth/bearer.js'
import type { TokenClaims } from './auth/verify-token.js'
import type { RateLimiter } from './http/rate-limiter.js'
import type { RequestState } from './request-state.js'

/**
 * With rate limits on, the token is verified first: a valid one counts against its subject, any
 * other request against its address, and a spent quota is refused (429) before the token's own
 * refusal (401). Returns the token's verdict, for the token's step to give.
 */
export function countRequest(
  req: IncomingMessage,
  state: RequestState,
  limiter: RateLimiter,
  authenticator: Authenticator,
): () => TokenClaims {
  const token = readBearerToken(req.headers.authorization)
  let claims: TokenClaims | undefined
  let refused: unknown
  if (token !== undefined) {
    try {
      claims = authenticator.authenticate(token)
    } catch (caught) {
      refused = caught
    }
  }
  const counted = limiter.count(req, claims?.sub)
  if (counted !== undefined) {
    state.cors = state.cors === undefined ? counted.headers : [...state.cors, ...counted.headers]
    if (counted.refusal !== undefined) throw counted.refusal
  }
  return () => {
    if (refused !== undefined) throw refused
    return claims ?? authenticator.authenticate(token)
  }
}
