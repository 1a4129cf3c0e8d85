import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

interface Pending {
  readonly res: ServerResponse
  readonly settle: () => void
}

/** The requests of each connection that have not settled yet. */
const pendingBySocket = new WeakMap<Socket, Set<Pending>>()

/**
 * Calls `done` exactly once for a request: when its response has finished, when the response
 * closed before that, or when its connection closed, whichever comes first. The last one matters:
 * on Node 20 a response queued behind another on a pipelined connection never emits `close` when
 * the connection dies, and a count that waits for it never goes down.
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
    res,
    settle() {
      if (!requests.delete(entry)) return
      // Stryker disable next-line StringLiteral: a listener left behind finds its entry gone and returns
      res.off('finish', entry.settle)
      // Stryker disable next-line StringLiteral: as above
      res.off('close', entry.settle)
      done(res.writableFinished)
    },
  }
  requests.add(entry)
  // Stryker disable next-line StringLiteral: a response that finishes also closes (or its socket does), a little later
  res.on('finish', entry.settle)
  // Stryker disable next-line StringLiteral: a response closes unfinished only with its socket, which settles it too
  res.on('close', entry.settle)
  // A connection that closed before this request was seen will not say so again.
  if (socket.destroyed) queueMicrotask(entry.settle)
}

/** True when a response on this connection has begun to be written. */
export function isResponding(socket: Socket): boolean {
  for (const entry of pendingBySocket.get(socket) ?? []) {
    if (entry.res.headersSent) return true
  }
  return false
}
