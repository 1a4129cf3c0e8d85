import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'

import type { HttpError } from './problem.js'

interface UnderWay {
  readonly req: IncomingMessage
  readonly answer: (problem: HttpError) => void
}

/** The request whose body each connection is receiving, and how it answers its time-out. */
const underWay = new WeakMap<Socket, UnderWay>()
/** Requests answered 408: the rest of their body, should it still come, is never read. */
const timedOut = new WeakSet<IncomingMessage>()

/**
 * Node reports a request whose body did not arrive within `requestTimeout` as an error of its
 * connection (`clientError`), though its head was read and the request has an id, a log line and
 * a handler waiting for its body. The listener says here how such a request answers its time-out.
 * The next request with a body on the connection takes its place.
 */
export function answerTimeoutBy(req: IncomingMessage, answer: (problem: HttpError) => void): void {
  underWay.set(req.socket, { req, answer })
}

/**
 * Hands a time-out to the request on `socket` whose body is still arriving; false when there is
 * none. One whose body arrived whole (answered or not) is not the one that timed out: the time-out
 * is then the headers' of a request pipelined behind it, which has no answer of its own yet.
 */
export function timeOutRequest(socket: Socket, problem: HttpError): boolean {
  const entry = underWay.get(socket)
  if (entry === undefined || entry.req.complete) return false
  underWay.delete(socket)
  // Marked before it is answered: the connection closes in stages and reads on meanwhile, so the
  // rest of the body may still arrive, and must not be run once the client was told 408.
  timedOut.add(entry.req)
  entry.answer(problem)
  return true
}

/** True for a request answered 408: its body, however much of it arrives after, is not read. */
export function hasTimedOut(req: IncomingMessage): boolean {
  return timedOut.has(req)
}
