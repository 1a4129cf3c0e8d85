import type { IncomingMessage } from 'node:http'

import { HttpError } from './problem.js'
import type { RouteSpec } from './route-spec.js'
import type { Router } from './router.js'

/** Origins allowed to call the service from a browser: a list, or `*` for any. */
export type CorsOrigins = '*' | readonly string[]

/**
 * Request headers a browser may send cross-origin (Authorization is never covered by `*`): every
 * header the service reads, Last-Event-ID included, which a script's fetch of the feed may send,
 * and traceparent, which a page's tracing adds to each fetch (one not allowed fails them all).
 */
export const CORS_ALLOW_HEADERS =
  'Authorization, Content-Type, Idempotency-Key, If-Match, If-None-Match, Last-Event-ID, ' +
  'traceparent, X-Request-Id'
/** Response headers a page's script may read, beyond the CORS-safelisted ones. */
export const CORS_EXPOSE_HEADERS =
  'ETag, Location, Link, X-Request-Id, Retry-After, Idempotent-Replayed, RateLimit, RateLimit-Policy, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Used, X-RateLimit-Reset'
/** How long a browser may keep a preflight's answer (Chromium caps this at 2 hours). */
export const CORS_MAX_AGE_S = 600

export interface Cors {
  /**
   * Headers for every answer, as a flat name/value list: `Vary: Origin` always (the answer
   * depends on it), plus the allow and expose headers when the origin may call the service.
   */
  headersFor(origin: string | undefined): readonly string[]
  /** An OPTIONS with an allowed Origin and Access-Control-Request-Method (the Fetch standard's CORS preflight). */
  isPreflight(req: IncomingMessage): boolean
  /** The extra headers of a preflight's 204, given the path's allowed methods. */
  preflightHeaders(allow: string): Readonly<Record<string, string>>
}

/** A configuration that cannot be used; the message says which origin and why. */
export class CorsConfigError extends Error {
  override name = 'CorsConfigError'
}

const VARY_ONLY = ['vary', 'Origin'] as const

/**
 * Builds the CORS policy, or undefined when no origin is configured (then no CORS header is sent
 * at all). With `*` the answer is a literal `*`: the service never reads cookies, and a bearer
 * token set by script is not a credential in the Fetch sense, so it never sends
 * Access-Control-Allow-Credentials and `*` lets any page call it with a token.
 */
export function createCors(origins: CorsOrigins | undefined): Cors | undefined {
  if (origins === undefined) return undefined
  const any = origins === '*'
  const allowed = new Set(any ? [] : origins.map(validateOrigin))
  if (!any && allowed.size === 0) return undefined
  const isAllowed = (origin: string | undefined): origin is string =>
    origin !== undefined && (any || allowed.has(origin))
  return {
    headersFor(origin) {
      if (!isAllowed(origin)) return VARY_ONLY
      return [
        'access-control-allow-origin',
        any ? '*' : origin,
        'access-control-expose-headers',
        CORS_EXPOSE_HEADERS,
        ...VARY_ONLY,
      ]
    },
    isPreflight(req) {
      return (
        req.method === 'OPTIONS' &&
        isAllowed(req.headers.origin) &&
        req.headers['access-control-request-method'] !== undefined
      )
    },
    preflightHeaders(allow) {
      return {
        'access-control-allow-methods': allow,
        'access-control-allow-headers': CORS_ALLOW_HEADERS,
        'access-control-max-age': String(CORS_MAX_AGE_S),
      }
    },
  }
}

/** `CORS_ORIGINS`: `*`, or a comma list of origins such as `https://app.example.com`. */
export function parseCorsOrigins(text: string): CorsOrigins {
  if (text.trim() === '*') return '*'
  const origins = text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
  return origins.map(validateOrigin)
}

/** An origin is scheme, host and port only, as browsers serialise it in the Origin header. */
function validateOrigin(origin: string): string {
  let parsed: URL
  try {
    parsed = new URL(origin)
  } catch {
    throw new CorsConfigError(`"${origin}" is not an origin (like https://app.example.com)`)
  }
  if ((parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.origin !== origin) {
    throw new CorsConfigError(
      `"${origin}" is not an origin: give scheme, host and port only, lower case, no path (like https://app.example.com)`,
    )
  }
  return origin
}

/**
 * The methods a path answers, as its Allow header says; an unknown path throws the router's 404,
 * so a preflight of it is answered like any request there.
 */
export function allowedMethods<R extends RouteSpec>(router: Router<R>, rawPath: string): string {
  try {
    router.match('OPTIONS', rawPath)
  } catch (error) {
    const allow = error instanceof HttpError ? error.headers['allow'] : undefined
    if (allow !== undefined) return allow
    throw error
  }
  // No route takes OPTIONS, so match always throws; this keeps the route table the one judge.
  throw new HttpError('method_not_allowed', 'OPTIONS is answered as a CORS preflight only.')
}
