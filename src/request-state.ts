import type { IncomingMessage } from 'node:http'
import { performance } from 'node:perf_hooks'

import { NO_PRECONDITIONS, type Preconditions } from './domain/preconditions.js'
import { readRequestId } from './http/request-id.js'
import { readTraceId } from './http/trace-context.js'
import type { HeldKey } from './request-idempotency.js'
import type { Route } from './routes/route.js'

/** What the listener (app.ts) knows of a request as it goes through its steps. */
export interface RequestState {
  readonly requestId: string
  readonly started: number
  readonly path: string
  readonly query: string
  sub: string | undefined
  counted: boolean
  /** The trace id of a valid `traceparent` (W3C Trace Context), for the log line. */
  readonly traceId: string | undefined
  /** The route matched; undefined until routing, and for 404 and 405. */
  route: Route | undefined
  /** If-Match and If-None-Match as the route declares them, once its body was read. */
  preconditions: Preconditions
  /** The request's `Idempotency-Key`, held from its headers until its answer is sent. */
  held?: HeldKey
  /** The handler wrote its answer itself. */
  streamed: boolean
  /**
   * Headers for every answer to this request, as a flat name/value list: CORS (cors.ts) and the
   * rate-limit fields (rate-limiter.ts); undefined when there are none.
   */
  cors?: readonly string[]
}

export function startRequest(req: IncomingMessage): RequestState {
  const url = toOriginForm(req.url ?? '/')
  const mark = url.indexOf('?')
  return {
    requestId: readRequestId(req.headers['x-request-id']),
    started: performance.now(),
    path: mark === -1 ? url : url.slice(0, mark),
    query: mark === -1 ? '' : url.slice(mark + 1),
    sub: undefined,
    counted: false,
    traceId: readTraceId(req.headers.traceparent),
    route: undefined,
    preconditions: NO_PRECONDITIONS,
    streamed: false,
  }
}

/** An absolute-form target (`GET http://host/users`, RFC 9112 §3.2.2) becomes its path and query. */
function toOriginForm(target: string): string {
  if (target.startsWith('/')) return target
  const authority = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/.exec(target)
  if (authority === null) return target
  const rest = target.slice(authority[0].length)
  return rest.startsWith('/') ? rest : `/${rest}`
}
