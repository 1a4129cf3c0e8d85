import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http'

import { type Authenticator, admitSubject, requireScope } from './auth/authenticate.js'
import { readBearerToken } from './auth/bearer.js'
import type { TokenClaims } from './auth/verify-token.js'
import { dropAnswerIfUnread } from './bulk/slow-client.js'
import type { UserRecord } from './domain/user.js'
import {
  ClientClosedError,
  hasBody,
  parseJsonBody,
  readBody,
  refuseAnnouncedTooLarge,
  validateContentType,
} from './http/body.js'
import { answerConditionalRead, readPreconditions } from './http/conditional-request.js'
import { allowedMethods, type CorsOrigins, createCors } from './http/cors.js'
import { isBehindLastRequest, isClosing, serveNoneAfter } from './http/lingering-close.js'
import { decodePathParams } from './http/percent-decode.js'
import { toHttpError } from './http/problem.js'
import type { RateLimiter } from './http/rate-limiter.js'
import { onSettled } from './http/request-accounting.js'
import { requestHeadProblem } from './http/request-head.js'
import { answerTimeoutBy } from './http/request-timeout.js'
import { toProblemReply } from './http/respond.js'
import { createRouter } from './http/router.js'
import { describeError, type Logger } from './log/logger.js'
import type { RequestMetrics } from './metrics/service-metrics.js'
import type { Availability } from './ops/availability.js'
import { StorageFaultLog } from './ops/storage-faults.js'
import { answer, cachePolicy, mustClose } from './request-answer.js'
import {
  type HeldKey,
  holdRequestKey,
  type RequestKeys,
  serveKeyed,
} from './request-idempotency.js'
import { countRequest } from './request-limits.js'
import { createRequestRecorder } from './request-record.js'
import { type RequestState, startRequest } from './request-state.js'
import { type Answer, intentOf, type Route, type RouteContext, STREAMED } from './routes/route.js'
import type { RouteServices } from './routes/route-services.js'

export interface AppParts {
  basePath: string
  authenticator: Authenticator
  availability: Availability
  /** The routes served; a route left out answers 404 like any unknown path. */
  routes: readonly Route[]
  /** What the handlers work with. */
  services: RouteServices
  logger: Logger
  /** Told of every request (metrics); undefined: nothing is counted. */
  metrics?: RequestMetrics | undefined
  /** Origins allowed to call from a browser (CORS); undefined sends no CORS headers. */
  corsOrigins?: CorsOrigins | undefined
  /** The rate limits; undefined: none (nothing counted, no field sent). */
  rateLimiter?: RateLimiter | undefined
  /** The `Idempotency-Key`s in flight; undefined: the header is ignored everywhere. */
  requestKeys?: RequestKeys | undefined
}

/**
 * The `(req, res)` listener: route → availability → rate limit → token → scope → body →
 * preconditions → handler, each step throwing one HttpError, and one catch that turns any error
 * into problem+json.
 */
export function createRequestListener(parts: AppParts): RequestListener {
  const router = createRouter(parts.routes, parts.basePath)
  const { authenticator, availability, logger, metrics, services, rateLimiter, requestKeys } = parts
  const { operations } = services
  const cors = createCors(parts.corsOrigins)
  const faults = new StorageFaultLog({ logger, storeHealthy: () => availability.storeHealthy() })
  const record = createRequestRecorder({ logger, metrics, availability, faults })

  /**
   * The request's steps, synchronously as far as they can go: only a step that really waits (a
   * subject check against the store, a body to read, the handler) continues in a promise, so that
   * a read costs no async frame of its own. Returns the handler's answer, or undefined when the
   * request was answered here; throws, or rejects, with the step's error.
   */
  const serve = (
    req: IncomingMessage,
    res: ServerResponse,
    state: RequestState,
  ): Answer | Promise<Answer> | undefined => {
    // `OPTIONS *` asks about the server as a whole (RFC 9110 §9.3.7): it is up, nothing to add;
    // no path to preflight either, whatever CORS fields it carries.
    if (state.path === '*') {
      answer(req, res, state, { status: 204 }, 'no-store')
      return undefined
    }
    if (cors?.isPreflight(req) === true) {
      const headers = cors.preflightHeaders(allowedMethods(router, state.path))
      answer(req, res, state, { status: 204, headers }, 'no-store')
      return undefined
    }
    const { route, rawParams } = router.match(req.method ?? 'GET', state.path)
    state.route = route
    // A body the handler reads as a stream may be left unread (an import past its limit): its
    // connection serves no other request. Decided now, before Node hands over the next one.
    if (route.body === 'stream') serveNoneAfter(req)
    let verdict: (() => TokenClaims) | undefined
    if (!route.root) {
      availability.enter()
      state.counted = true
      const refusal = availability.refusal(intentOf(route))
      if (refusal !== undefined) throw refusal
      if (rateLimiter !== undefined) verdict = countRequest(req, state, rateLimiter, authenticator)
    }
    if (route.scope === undefined)
      return handle(req, res, state, route, rawParams, undefined, undefined)
    const claims =
      verdict?.() ?? authenticator.authenticate(readBearerToken(req.headers.authorization))
    state.sub = claims.sub
    const { scope } = route
    // The id as sent: getAs takes only a canonical id, which percent-decoding leaves as it is.
    const read =
      route.readsUser === undefined
        ? undefined
        : operations.getAs(rawParams[route.readsUser] ?? '', claims.sub, claims.iat)
    if (read !== undefined) {
      return read.then(({ refusal, user }) => {
        admitSubject(claims, scope, refusal)
        return handle(req, res, state, route, rawParams, claims, user)
      })
    }
    const check = operations.subjectRefusal(claims.sub, claims.iat)
    if (check === undefined) {
      requireScope(claims, scope)
      return handle(req, res, state, route, rawParams, claims, undefined)
    }
    return check.then((refusal) => {
      admitSubject(claims, scope, refusal)
      return handle(req, res, state, route, rawParams, claims, undefined)
    })
  }

  /**
   * The body's checks, the request's `Idempotency-Key` held, the body read, then the handler (or
   * the replay of a kept answer).
   */
  const handle = (
    req: IncomingMessage,
    res: ServerResponse,
    state: RequestState,
    route: Route,
    rawParams: Record<string, string>,
    claims: TokenClaims | undefined,
    readUser: (() => UserRecord) | undefined,
  ): Answer | Promise<Answer> => {
    // A streamed body is read by its handler, not readBody: it cannot defer the untyped 415.
    if (route.body !== 'none') validateContentType(req, route.mediaTypes, route.body !== 'stream')
    // 415 → 413 → 400 for the path's encoding → a key's 409 in use, its replay or its 422.
    if (route.body !== 'none' && route.body !== 'stream') refuseAnnouncedTooLarge(req)
    const params = decodePathParams(rawParams)
    const held =
      requestKeys === undefined ? undefined : holdRequestKey(requestKeys, req, state, route, claims)
    const run = (body: unknown): Answer | Promise<Answer> =>
      route.handle(contextOf(req, res, state, params, body, claims, held, readUser))
    // A streamed body is the handler's to read, as it arrives.
    if (route.body === 'stream') return run(undefined)
    if (held === undefined) {
      if (route.body === 'none') return run(undefined)
      const rule = route.body
      return readBody(req).then((bytes) => run(parseJsonBody(bytes, rule)))
    }
    return serveKeyed(req, state, route, held, run)
  }

  const contextOf = (
    req: IncomingMessage,
    res: ServerResponse,
    state: RequestState,
    params: Record<string, string>,
    body: unknown,
    claims: TokenClaims | undefined,
    key: HeldKey | undefined,
    readUser: (() => UserRecord) | undefined,
  ): RouteContext => {
    // After the body's checks: an empty header is a 400 that comes after a 413 or a 415.
    state.preconditions = readPreconditions(req.headers)
    return {
      req,
      res,
      params,
      rawQuery: state.query,
      body,
      headers: req.headers,
      preconditions: state.preconditions,
      requestId: state.requestId,
      change: { actor: state.sub, requestId: state.requestId },
      key,
      claims,
      readUser,
      cors: state.cors,
      faults,
      services,
    }
  }

  /** Sends what the handler answered (a stream has answered already). */
  const finish = (
    req: IncomingMessage,
    res: ServerResponse,
    state: RequestState,
    answered: Answer,
  ): void => {
    if (answered === STREAMED) {
      state.streamed = true
      return
    }
    try {
      const route = state.route
      const reply =
        route === undefined ? answered : answerConditionalRead(route, state.preconditions, answered)
      answer(req, res, state, reply, cachePolicy(route, reply))
      // A page the socket could not take: dropped if unread, not held in flight for good.
      dropAnswerIfUnread(res, services.bulk.stallMs)
    } catch (caught) {
      fail(req, res, state, caught)
    }
    state.held?.end()
  }

  const fail = (
    req: IncomingMessage,
    res: ServerResponse,
    state: RequestState,
    caught: unknown,
  ): void => {
    // Its answer is on its way, or nobody waits for it: the key is free again, unless kept.
    state.held?.end()
    // A request answered 408 for its late body has its answer out, its connection closing in
    // stages: whatever its steps end in after, nothing more is sent, nor the connection cut.
    if (caught instanceof ClientClosedError) {
      if (!res.writableEnded) res.destroy()
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
      if (!res.writableEnded) res.destroy()
      return
    }
    answer(
      req,
      res,
      state,
      toProblemReply(error, state.requestId),
      'no-store',
      mustClose(error, availability),
    )
  }

  return (req, res) => {
    // A request pipelined behind an answer that closes the connection is never answered.
    if (isClosing(req.socket) || isBehindLastRequest(req)) return
    const state = startRequest(req)
    if (cors !== undefined) state.cors = cors.headersFor(req.headers.origin)
    metrics?.requestStarted()
    if (hasBody(req)) answerTimeoutBy(req, (problem) => fail(req, res, state, problem))
    onSettled(req, res, (finished) => record(req, res, state, finished))
    // Node's own checks of Host and Expect would answer with a bare status line, so the server
    // leaves them to us (http-server.ts).
    const problem = requestHeadProblem(req)
    if (problem !== undefined) {
      answer(req, res, state, toProblemReply(problem, state.requestId), 'no-store', true)
      return
    }
    let answered: Answer | Promise<Answer> | undefined
    try {
      answered = serve(req, res, state)
    } catch (caught) {
      fail(req, res, state, caught)
      return
    }
    if (answered === undefined) return
    if (!(answered instanceof Promise)) {
      finish(req, res, state, answered)
      return
    }
    answered.then(
      (settled) => {
        finish(req, res, state, settled)
      },
      (caught: unknown) => {
        fail(req, res, state, caught)
      },
    )
  }
}
