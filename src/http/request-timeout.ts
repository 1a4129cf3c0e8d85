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
 * a handler waiting for its body. The listener says here how such a request answers its time-out,
 * until the function returned is called (when the request settles).
 */
export function answerTimeoutBy(
  req: IncomingMessage,
  answer: (problem: HttpError) => void,
): () => void {
  const socket = req.socket
  const entry: UnderWay = { req, answer }
  underWay.set(socket, entry)
  return () => {
    if (underWay.get(socket) === entry) underWay.delete(socket)
  }
}

/** Hands a time-out to the request under way on `socket`; false when there is none. */
export function timeOutRequest(socket: Socket, problem: HttpError): boolean {
  const entry = underWay.get(socket)
  if (entry === undefined) return false
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
