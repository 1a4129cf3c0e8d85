import type { IncomingMessage, ServerResponse } from 'node:http'

import { isClosing } from '../http/lingering-close.js'

/**
 * Waits one turn of the event loop before a streaming answer starts. It starts at once, so a head
 * Node's parser refuses right after it was dispatched (Transfer-Encoding: gzip) would find it
 * begun and could only cut the connection: the wait lets the parser's 400 go first, as on every
 * other route. False when the connection is closing or gone: nothing is to be sent.
 */
export async function readyToStream(req: IncomingMessage): Promise<boolean> {
  await new Promise((resolve) => {
    setImmediate(resolve)
  })
  return !(isClosing(req.socket) || req.socket.destroyed)
}

/**
 * The head of an answer a handler writes itself: x-request-id, no-store, CORS (a flat name/value
 * list, undefined when CORS is off), as a flat list. A route's context carries both.
 */
export function streamHeaders(request: {
  readonly requestId: string
  readonly cors: readonly string[] | undefined
}): string[] {
  return ['x-request-id', request.requestId, 'cache-control', 'no-store', ...(request.cors ?? [])]
}

/** True once the socket takes more; false when it closed or stayed full for `stallMs`. */
export function drained(res: ServerResponse, stallMs: number): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false)
  return new Promise((resolve) => {
    const done = (ok: boolean) => (): void => {
      clearTimeout(timer)
      res.off('drain', onDrain)
      res.off('close', onClose)
      if (!ok) res.destroy()
      resolve(ok)
    }
    const onDrain = done(true)
    const onClose = done(false)
    const timer = setTimeout(done(false), stallMs)
    res.on('drain', onDrain)
    res.on('close', onClose)
  })
}

/**
 * An answer just ended, watched by dropIfUnread once its bytes go out and the socket could not
 * take them all. One pipelined behind an answer still being sent has no socket yet: Node hands
 * it the socket (and writes it) when that answer ends, however long that takes.
 */
export function dropAnswerIfUnread(res: ServerResponse, stallMs: number): void {
  if (res.socket === null) {
    // 'socket' comes just before Node writes what the answer queued: looked at right after.
    res.once('socket', () => {
      queueMicrotask(() => {
        dropAnswerIfUnread(res, stallMs)
      })
    })
    return
  }
  // A large body still has slices to write (http/respond.ts) when the socket took the first ones.
  if (!res.destroyed && !res.writableFinished) dropIfUnread(res, stallMs)
}

/**
 * An answer ended (or a large one being written a slice at a time) but not yet taken by its
 * client: dropped when the client reads none of it for `stallMs`, so that no connection holds its
 * last megabyte forever. A slice the socket took (a drain) or a shorter buffer is progress.
 */
export function dropIfUnread(res: ServerResponse, stallMs: number): void {
  let waiting = res.writableLength
  let took = false
  const onDrain = (): void => {
    took = true
  }
  const check = (): void => {
    if (res.writableFinished || res.destroyed) return
    if (!took && res.writableLength >= waiting) {
      res.destroy()
      return
    }
    took = false
    waiting = res.writableLength
    timer = setTimeout(check, stallMs)
  }
  let timer = setTimeout(check, stallMs)
  res.on('drain', onDrain)
  res.once('close', () => {
    clearTimeout(timer)
    res.off('drain', onDrain)
  })
}
