import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

interface Pending {
  readonly res: ServerResponse
  readonly settle: () => void
}

/** The requests of each connection that have not settled yet. */
const pendingBySocket = new WeakMap<Socket, Set<Pending>>()

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
    res,
    settle() {
      // Settled already. The 'finish' listener is left on the response: after a finish it is
      // spent, and after its connection closed the response can no longer finish.
      if (!requests.delete(entry)) return
      done(res.writableFinished)
    },
  }
  requests.add(entry)
  res.on('finish', entry.settle)
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
