import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'

import { requireScope, type Authenticator } from './auth/authenticate.js'
import { readBearerToken } from './auth/bearer.js'
import type { TokenClaims } from './auth/verify-token.js'
import { HttpError, toHttpError } from './errors.js'
import { ClientClosedError, isBodyPending, parseJsonBody, readBody, validateContentType } from './http/body.js'
import { allowedMethods, createCors, type CorsOrigins } from './http/cors.js'
import type { Handler } from './http/handler.js'
import { isClosing, lingerAfterResponse } from './http/lingering-close.js'
import { decodePathParams } from './http/percent-decode.js'
import { onSettled } from './http/request-accounting.js'
import { readRequestId } from './http/request-id.js'
import { sendReply, toProblemReply, type CachePolicy, type Reply } from './http/respond.js'
import { ROUTES, type OperationId, type RouteSpec } from './http/route-table.js'
import { createRouter } from './http/router.js'
import { readTraceId } from './http/trace-context.js'
import { describeError, type Logger } from './logger.js'
import type { RequestMetrics } from './metrics/service-metrics.js'
import type { Availability, Intent } from './ops/availability.js'
import { StorageFaultLog } from './ops/storage-faults.js'
import type { EventRoutes, StreamRequest } from './events/routes.js'
import type { UserOperations } from './users/user-operations.js'
import { isBulkOperation, type BulkOperationId, type StreamHandler } from './users/export-import.js'

export interface AppParts {
  basePath: string
  authenticator: Authenticator
  availability: Availability
  operations: UserOperations
  /** A handler for each operation of the route table. */
  handlers: Readonly<Record<Exclude<OperationId, BulkOperationId>, Handler>>
  /** The export and import, which stream their bodies (§12). */
  streams: Readonly<Record<BulkOperationId, StreamHandler>>
  logger: Logger
  /** Told of every request (§14); undefined: nothing is counted. */
  metrics?: RequestMetrics | undefined
  /** The routes served (default: all of the table); a route left out answers 404 like any unknown path. */
  routes?: readonly AppRoute[] | undefined
  /** Origins allowed to call from a browser (§13); undefined sends no CORS headers. */
  corsOrigins?: CorsOrigins | undefined
  /** The change feed's live streams (§10); undefined: `GET /events` answers pages only. */
  events?: EventRoutes | undefined
}

const EMPTY: Buffer = Buffer.alloc(0)

type AppRoute = (typeof ROUTES)[number]

/**
 * The `(req, res)` listener: route → availability → token → scope → body → handler, each step
 * throwing one HttpError, and one catch that turns any error into problem+json.
 */
export function createRequestListener(parts: AppParts): RequestListener {
  const router = createRouter(parts.routes ?? ROUTES, parts.basePath)
  const { authenticator, availability, logger, metrics, operations } = parts
  const logRequests = logger.isEnabled?.('info') ?? true
  const cors = createCors(parts.corsOrigins)
  const faults = new StorageFaultLog({ logger, storeHealthy: () => availability.storeHealthy() })

  const serve = async (req: IncomingMessage, res: ServerResponse, state: RequestState): Promise<void> => {
    if (cors?.isPreflight(req) === true) {
      const headers = cors.preflightHeaders(allowedMethods(router, state.path))
      answer(req, res, state, { status: 204, headers }, 'no-store')
      return
    }
    const { route, rawParams } = router.match(req.method ?? 'GET', state.path)
    state.route = route
    if (!route.root) {
      availability.enter()
      state.counted = true
      const refusal = availability.refusal(intentOf(route))
      if (refusal !== undefined) throw refusal
    }
    let claims: TokenClaims | undefined
    if (route.scope !== undefined) {
      claims = authenticator.authenticate(readBearerToken(req.headers.authorization))
      state.sub = claims.sub
      requireScope(claims, route.scope)
      const check = operations.checkSubject(claims.sub)
      if (check !== undefined) await check
    }
    const { operationId } = route
    if (isBulkOperation(operationId)) {
      if (route.body !== 'none') validateContentType(req, route.mediaTypes)
      // A streaming answer starts at once, so a head Node's parser refuses right after it was
      // dispatched (Transfer-Encoding: gzip) would find it begun and could only cut the
      // connection: one turn of the loop lets the parser's 400 go first, as on every other route.
      await new Promise((resolve) => { setImmediate(resolve) })
      if (isClosing(req.socket) || req.socket.destroyed) return
      const headers = ['x-request-id', state.requestId, 'cache-control', 'no-store', ...(state.cors ?? [])]
      const { requestId } = state
      const report = {
        fault: (error: HttpError, line: number) => { faults.fault(error, { requestId, operation: operationId, line }) },
        stored: () => { faults.wrote() },
      }
      await parts.streams[operationId]({ req, res, headers, sub: state.sub, requestId, report })
      return
    }
    if (route.operationId === 'listEvents' && parts.events?.wantsStream(req) === true) {
      // A stream outlives its request's checks: it ends at the token's expiry or its subject's loss of access.
      const token = claims === undefined ? undefined : streamToken(claims, operations)
      await parts.events.stream(req, res, { rawQuery: state.query, requestId: state.requestId, headers: state.cors, token })
      return
    }
    let bytes = EMPTY
    if (route.body !== 'none') {
      validateContentType(req, route.mediaTypes)
      bytes = await readBody(req)
    }
    const params = decodePathParams(rawParams)
    const body = route.body === 'none' ? undefined : parseJsonBody(bytes, route.body)
    // Who changes what (§10): the events of this request's writes name its subject and request id.
    const change = { actor: state.sub, requestId: state.requestId }
    const context = { params, rawQuery: state.query, body, headers: req.headers, change }
    const reply = await parts.handlers[operationId](context)
    answer(req, res, state, reply, cachePolicy(route, reply))
  }

  const fail = (req: IncomingMessage, res: ServerResponse, state: RequestState, caught: unknown): void => {
    if (caught instanceof ClientClosedError) {
      res.destroy()
      return
    }
    const error = toHttpError(caught)
    if (error.code === 'internal') {
      logger.error('request failed', { requestId: state.requestId, ...describeError(error.cause) })
    }
    // A fault of the service's own storage (it has a cause; a refusal while read-only has none).
    if (error.code === 'storage_unavailable' && error.cause !== undefined) {
      faults.fault(error, { requestId: state.requestId, operation: state.route?.operationId ?? '' })
    }
    if (res.headersSent) {
      res.destroy()
      return
    }
    answer(req, res, state, toProblemReply(error, state.requestId), 'no-store', mustClose(error, availability))
  }

  return (req, res) => {
    // A request pipelined behind an answer that closes the connection is never answered.
    if (isClosing(req.socket)) return
    const state = startRequest(req)
    if (cors !== undefined) state.cors = cors.headersFor(req.headers.origin)
    metrics?.requestStarted()
    onSettled(req, res, (finished) => {
      if (state.counted) availability.leave()
      if (faults.inEpisode && finished && isWrite(state.route) && res.statusCode < 300) faults.wrote()
      if (!logRequests && metrics === undefined) return
      const status = finished ? res.statusCode : 499
      const elapsedMs = performance.now() - state.started
      metrics?.requestFinished(state.route, req.method, status, elapsedMs)
      if (!logRequests) return
      const entry = {
        requestId: state.requestId,
        method: req.method ?? '',
        path: state.path,
        status,
        durationMs: Math.round(elapsedMs * 1000) / 1000,
        sub: state.sub,
        traceId: state.traceId,
      }
      if (logger.request !== undefined) logger.request(entry)
      else logger.info('request', entry)
    })
    // RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400. Node's own check would answer it
    // with a bare status line, so the server leaves it to us (requireHostHeader: false).
    if (req.httpVersion === '1.1' && req.headers.host === undefined) {
      const problem = new HttpError('bad_request', 'An HTTP/1.1 request needs a Host header.')
      answer(req, res, state, toProblemReply(problem, state.requestId), 'no-store', true)
      return
    }
    serve(req, res, state).catch((caught: unknown) => { fail(req, res, state, caught) })
  }
}

/**
 * Sends a reply. An answer given before the whole request body has arrived closes the connection,
 * in stages, so that the client reads the answer instead of a reset (RFC 9112 §9.6).
 */
function answer(
  req: IncomingMessage, res: ServerResponse, state: RequestState, reply: Reply, cache: CachePolicy, close = false,
): void {
  if (isClosing(req.socket)) {
    res.destroy()
    return
  }
  const closing = close || isBodyPending(req)
  if (closing) lingerAfterResponse(req.socket)
  sendReply(res, reply, state.requestId, cache, closing, state.cors)
}

function streamToken(claims: TokenClaims, operations: UserOperations): StreamRequest['token'] {
  return { sub: claims.sub, exp: claims.exp, checkSubject: () => operations.checkSubject(claims.sub) }
}

/**
 * What a route asks of availability. The export is a read that maintenance is for: a backup or a
 * migration reads every user while nothing changes, so it is served in maintenance.
 */
function intentOf(route: RouteSpec): Intent {
  if (route.operationId === 'exportUsers') return 'export'
  return route.method === 'GET' ? 'read' : 'write'
}

/** A write answered 2xx changed the store (an import's lines say so one by one instead). */
function isWrite(route: RouteSpec | undefined): boolean {
  return route !== undefined && route.method !== 'GET' && !route.root && !isBulkOperation(route.operationId)
}

function mustClose(error: HttpError, availability: Availability): boolean {
  return error.code === 'payload_too_large' || availability.phase === 'stopping'
}

interface RequestState {
  readonly requestId: string
  readonly started: number
  readonly path: string
  readonly query: string
  sub: string | undefined
  counted: boolean
  /** The trace id of a valid `traceparent` (W3C Trace Context), for the log line. */
  readonly traceId: string | undefined
  /** The route matched; undefined until routing, and for 404 and 405. */
  route: RouteSpec | undefined
  /** CORS headers for every answer to this request (cors.ts); undefined when CORS is off. */
  cors?: readonly string[]
}

function startRequest(req: IncomingMessage): RequestState {
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

/** Successful reads of users may be kept privately and revalidated; nothing else may be stored. */
function cachePolicy(route: RouteSpec, reply: Reply): CachePolicy {
  return route.cacheable && (reply.status === 200 || reply.status === 304) ? 'private' : 'no-store'
}
