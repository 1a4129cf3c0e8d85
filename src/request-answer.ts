import type { IncomingMessage, ServerResponse } from 'node:http'

import { isBodyPending } from './http/body.js'
import { isClosing, isLastRequest, lingerAfterResponse } from './http/lingering-close.js'
import type { HttpError } from './http/problem.js'
import { type CachePolicy, type Reply, sendReply } from './http/respond.js'
import type { Availability } from './ops/availability.js'
import type { RequestState } from './request-state.js'
import { intentOf, type Route } from './routes/route.js'

/**
 * Sends a reply. An answer given before the whole request body has arrived closes the connection,
 * in stages, so that the client reads the answer instead of a reset (RFC 9112 §9.6); so does the
 * answer to the last request a connection serves (an import refused).
 */
export function answer(
  req: IncomingMessage,
  res: ServerResponse,
  state: RequestState,
  reply: Reply,
  cache: CachePolicy,
  close = false,
): void {
  // Answered already: a 408 for a late body (http/request-timeout.ts), whatever the steps did after.
  if (res.writableEnded) return
  if (isClosing(req.socket)) {
    res.destroy()
    return
  }
  const closing = close || isBodyPending(req) || isLastRequest(req)
  if (closing) lingerAfterResponse(req.socket)
  sendReply(res, reply, state.requestId, cache, closing, state.cors)
}

/**
 * A write answered 2xx changed the store. A handler that writes its answer itself (an import)
 * reports each user it stored instead.
 */
export function isWrite(state: RequestState): boolean {
  const route = state.route
  return route !== undefined && !route.root && intentOf(route) === 'write' && !state.streamed
}

export function mustClose(error: HttpError, availability: Availability): boolean {
  return error.code === 'payload_too_large' || availability.phase === 'stopping'
}

/** Successful reads of users may be kept privately and revalidated; nothing else may be stored. */
export function cachePolicy(route: Route | undefined, reply: Reply): CachePolicy {
  return route?.cacheable === true && (reply.status === 200 || reply.status === 304)
    ? 'private'
    : 'no-store'
}
