import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'

import { requireScope, type Authenticator } from './auth/authenticate.js'
import { readBearerToken } from './auth/bearer.js'
import { toHttpError, type HttpError } from './errors.js'
import { ClientClosedError, isBodyPending, parseJsonBody, readBody, validateContentType } from './http/body.js'
import type { Handler } from './http/handler.js'
import { isClosing, lingerAfterResponse } from './http/lingering-close.js'
import { decodePathParams } from './http/percent-decode.js'
import { onSettled } from './http/request-accounting.js'
import { readRequestId } from './http/request-id.js'
import { sendReply, toProblemReply, type CachePolicy, type Reply } from './http/respond.js'
import { ROUTES, type OperationId, type RouteSpec } from './http/route-table.js'
import { createRouter } from './http/router.js'
import { describeError, type Logger } from './logger.js'
import type { Availability } from './ops/availability.js'
import type { UserOperations } from './users/user-operations.js'

export interface AppParts {
  basePath: string
  authenticator: Authenticator
  availability: Availability
  operations: UserOperations
  /** A handler for each operation of the route table. */
  handlers: Readonly<Record<OperationId, Handler>>
  logger: Logger
}

const EMPTY: Buffer = Buffer.alloc(0)

/**
 * The `(req, res)` listener: route → availability → token → scope → body → handler, each step
 * throwing one HttpError, and one catch that turns any error into problem+json.
 */
export function createRequestListener(parts: AppParts): RequestListener {
  const router = createRouter(ROUTES, parts.basePath)
  const { authenticator, availability, logger, operations } = parts
  const logRequests = logger.isEnabled?.('info') ?? true

  const serve = async (req: IncomingMessage, res: ServerResponse, state: RequestState): Promise<void> => {
    const { route, rawParams } = router.match(req.method ?? 'GET', state.path)
    if (!route.root) {
      availability.enter()
      state.counted = true
      const refusal = availability.refusal(route.method === 'GET' ? 'read' : 'write')
      if (refusal !== undefined) throw refusal
    }
    if (route.scope !== undefined) {
      const claims = authenticator.authenticate(readBearerToken(req.headers.authorization))
      state.sub = claims.sub
      requireScope(claims, route.scope)
      const check = operations.checkSubject(claims.sub)
      if (check !== undefined) await check
    }
    let bytes = EMPTY
    if (route.body !== 'none') {
      validateContentType(req, route.mediaTypes)
      bytes = await readBody(req)
    }
    const params = decodePathParams(rawParams)
    const body = route.body === 'none' ? undefined : parseJsonBody(bytes, route.body)
    const reply = await parts.handlers[route.operationId]({ params, rawQuery: state.query, body, headers: req.headers })
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
    onSettled(req, res, (finished) => {
      if (state.counted) availability.leave()
      if (!logRequests) return
      const entry = {
        requestId: state.requestId,
        method: req.method ?? '',
        path: state.path,
        status: finished ? res.statusCode : 499,
        durationMs: Math.round((performance.now() - state.started) * 1000) / 1000,
        sub: state.sub,
      }
      if (logger.request !== undefined) logger.request(entry)
      else logger.info('request', entry)
    })
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
  sendReply(res, reply, state.requestId, cache, closing)
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
