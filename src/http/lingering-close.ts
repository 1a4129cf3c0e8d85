import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'

/**
 * How long, and how many more bytes, a closing connection keeps reading what the client still
 * sends (RFC 9112 §9.6; nginx calls it lingering close). Closing a socket whose receive buffer
 * holds unread bytes makes the kernel send a reset, which destroys the answer the client has not
 * read yet; reading on for a while lets the answer arrive first. The bounds stop a client from
 * holding the socket open by sending forever: 2 s is far more than a client needs to notice the
 * answer and stop, and 1 MiB is what a fast sender pushes in that time on a slow link.
 */
export const LINGER_MS = 2000
export const LINGER_BYTES = 1024 * 1024

/** The bounds of one lingering close; tests pass their own. */
export interface LingerBounds {
  readonly ms: number
  readonly bytes: number
}

const BOUNDS: LingerBounds = { ms: LINGER_MS, bytes: LINGER_BYTES }

const lingering = new WeakSet<Socket>()

/** True while a socket is being closed in stages: nothing more may be answered on it. */
export function isClosing(socket: Socket): boolean {
  return lingering.has(socket)
}

/** The request after which a connection serves no other; set before the next one is read. */
const lastRequests = new WeakMap<Socket, IncomingMessage>()

/**
 * Makes `req` the last request its connection serves: its answer closes the connection, and a
 * request read behind it is not processed (RFC 9112 §9.6). Node's parser reads on past a body
 * that arrived whole and hands over the requests behind it at once, before any handler has run:
 * this must be called as the request is dispatched, not once its handler has begun.
 */
export function serveNoneAfter(req: IncomingMessage): void {
  lastRequests.set(req.socket, req)
}

/** True when `req` is the last request its connection serves. */
export function isLastRequest(req: IncomingMessage): boolean {
  return lastRequests.get(req.socket) === req
}

/** True when `req` came behind its connection's last request: it is neither processed nor answered. */
export function isBehindLastRequest(req: IncomingMessage): boolean {
  const last = lastRequests.get(req.socket)
  return last !== undefined && last !== req
}

/**
 * Half-closes the socket once everything written has been sent, then reads and discards until the
 * client closes its side or a bound is passed, and only then closes it for good.
 */
export function closeInStages(socket: Socket, bounds: LingerBounds = BOUNDS): void {
  if (lingering.has(socket) || socket.destroyed) return
  lingering.add(socket)
  socket.end()
  const start = socket.bytesRead
  const destroy = (): void => {
    socket.destroy()
  }
  const timer = setTimeout(destroy, bounds.ms)
  timer.unref()
  // The bytes are counted on every read, not on a clock: a sender on a local link pushes tens of
  // MiB in 100 ms. A 'data' listener also makes Node's HTTP server hand the socket back from its
  // native parser to the stream (it "unconsumes" on 'data'), so every read passes through here;
  // it resumes a socket nobody reads yet.
  const count = (): void => {
    socket.on('data', () => {
      if (socket.bytesRead - start > bounds.bytes) destroy()
    })
  }
  // A socket Node paused for back-pressure (a request body left paused) stays paused until that
  // body is resumed. Handed back while paused, it would never read again: the native read it
  // stopped still counts as in flight for the stream, so resuming starts none. Node's own handler
  // restarts it on 'resume' while it is still its parser's, so the hand-over waits until then.
  if (socket.isPaused()) socket.once('resume', count)
  else count()
  // No 'end' listener: once the client ends its side too, the socket's autoDestroy closes it.
  // Stryker disable next-line StringLiteral,BlockStatement: the timer is unref'd and destroy() of a closed socket does nothing; clearing it only frees it sooner
  socket.once('close', () => {
    clearTimeout(timer)
  })
}

/**
 * Makes the connection under a response that says `Connection: close` close in stages. Node ends
 * such a connection with `socket.destroySoon()` once the response is finished (in every version
 * from 20 on); this socket's own property takes its place.
 */
export function lingerAfterResponse(socket: Socket): void {
  socket.destroySoon = () => {
    closeInStages(socket)
  }
}
