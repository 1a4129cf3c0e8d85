import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

interface Pending {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly settle: () => void
}

/** The requests of each connection that have not settled yet. */
const pendingBySocket = new WeakMap<Socket, Set<Pending>>()
/** What waits for some of a connection's requests to settle (whenSettled). */
const waitingBySocket = new WeakMap<Socket, { entries: Set<Pending>; run: () => void }>()

/**
 * Calls `done` exactly once for a request: when its response has finished, or when its connection
 * closed before that, whichever comes first. A response closes unfinished only with its connection
 * (its own `close` follows the socket's), so the socket's one listener serves every request on it;
 * and on Node 20 a response queued behind another on a pipelined connection never emits `close`
 * when the connection dies, so a count that waited for it would never go down.
 */
export function onSettled(
  req: IncomingMessage,
  res: ServerResponse,
  done: (finished: boolean) => void,
): void {
  const socket = req.socket
  let pending = pendingBySocket.get(socket)
  if (pending === undefined) {
    const set = new Set<Pending>()
    pending = set
    pendingBySocket.set(socket, set)
    socket.once('close', () => {
      for (const entry of set) entry.settle()
    })
  }
  const requests = pending
  const entry: Pending = {
    req,
    res,
    settle() {
      // Settled already. The 'finish' listener is left on the response: after a finish it is
      // spent, and after its connection closed the response can no longer finish.
      if (!requests.delete(entry)) return
      done(res.writableFinished)
      const waiting = waitingBySocket.get(socket)
      if (waiting === undefined || !waiting.entries.delete(entry) || waiting.entries.size > 0) {
        return
      }
      waitingBySocket.delete(socket)
      waiting.run()
    },
  }
  requests.add(entry)
  res.on('finish', entry.settle)
  // A connection that closed before this request was seen will not say so again.
  if (socket.destroyed) queueMicrotask(entry.settle)
}

/**
 * Runs `run` once every request this connection has carried whole has settled (at once when none
 * is pending): what is written to the connection then comes after their answers, in the order
 * the requests came (RFC 9112 §9.3.2). A request whose message is not whole yet is not waited
 * for: it is the one the parser refused, in its body. One waiter per connection: that refusal.
 */
export function whenSettled(socket: Socket, run: () => void): void {
  const pending = pendingBySocket.get(socket) ?? []
  const before = new Set([...pending].filter((entry) => entry.req.complete))
  if (before.size === 0) run()
  else waitingBySocket.set(socket, { entries: before, run })
}

/**
 * True when a request whose message is not whole has begun its answer (an import streams its
 * results while its body comes): a refusal of that body can no longer be sent in its place.
 */
export function isAnsweringUnfinished(socket: Socket): boolean {
  for (const entry of pendingBySocket.get(socket) ?? []) {
    if (!entry.req.complete && entry.res.headersSent) return true
  }
  return false
}
