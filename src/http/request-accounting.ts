import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

interface Pending {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly settle: () => void
}

/** A connection's requests that have not settled yet, and what waits for some of them. */
interface Connection {
  readonly requests: Set<Pending>
  waiting: { readonly entries: Set<Pending>; readonly run: () => void } | undefined
}

const connections = new WeakMap<Socket, Connection>()

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
  const connection = connectionOf(req.socket)
  const { requests } = connection
  const entry: Pending = {
    req,
    res,
    settle() {
      // Settled already. The 'finish' listener is left on the response: after a finish it is
      // spent, and after its connection closed the response can no longer finish.
      if (!requests.delete(entry)) return
      // An answer cut once it was all written (a client that read none of it, dropped) reads as
      // finished: its socket's buffer went with the socket. It never reached the client.
      done(res.writableFinished && !res.destroyed)
      const { waiting } = connection
      if (waiting === undefined || !waiting.entries.delete(entry) || waiting.entries.size > 0) {
        return
      }
      connection.waiting = undefined
      waiting.run()
    },
  }
  requests.add(entry)
  res.on('finish', entry.settle)
  // A connection that closed before this request was seen will not say so again.
  if (req.socket.destroyed) queueMicrotask(entry.settle)
}

/** The connection's record, made with its first request; its close settles what is pending. */
function connectionOf(socket: Socket): Connection {
  const known = connections.get(socket)
  if (known !== undefined) return known
  const made: Connection = { requests: new Set(), waiting: undefined }
  connections.set(socket, made)
  socket.once('close', () => {
    for (const entry of made.requests) entry.settle()
  })
  return made
}

/**
 * Runs `run` once every request this connection has carried whole has settled (at once when none
 * is pending): what is written to the connection then comes after their answers, in the order
 * the requests came (RFC 9112 §9.3.2). A request whose message is not whole yet is not waited
 * for: it is the one the parser refused, in its body. One waiter per connection: that refusal.
 */
export function whenSettled(socket: Socket, run: () => void): void {
  const connection = connections.get(socket)
  const before = new Set([...(connection?.requests ?? [])].filter((entry) => entry.req.complete))
  if (connection === undefined || before.size === 0) run()
  else connection.waiting = { entries: before, run }
}

/**
 * True when a request whose message is not whole has begun its answer (an import streams its
 * results while its body comes): a refusal of that body can no longer be sent in its place.
 */
export function isAnsweringUnfinished(socket: Socket): boolean {
  for (const entry of connections.get(socket)?.requests ?? []) {
    if (!entry.req.complete && entry.res.headersSent) return true
  }
  return false
}

/**
 * Runs `run` once, when the answer can no longer be written: its response closed, or its
 * connection did. The second is needed for the reason onSettled gives: on Node 20 a response
 * queued behind another on a pipelined connection never emits `close` when the connection dies,
 * so what it holds (an event stream's slot) would never be given back.
 */
export function onAnswerClosed(res: ServerResponse, run: () => void): void {
  const socket = res.req.socket
  if (res.destroyed || socket.destroyed) {
    queueMicrotask(run)
    return
  }
  let ran = false
  const closed = (): void => {
    // The socket's close makes Node close the response first, inside the socket's own emit,
    // which still calls the listener removed meanwhile: the flag keeps it to one run.
    if (ran) return
    ran = true
    res.off('close', closed)
    socket.off('close', closed)
    run()
  }
  res.on('close', closed)
  socket.on('close', closed)
}
