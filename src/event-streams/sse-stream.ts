import type { ServerResponse } from 'node:http'

import { eventJson } from '../domain/event.js'
import { onAnswerClosed } from '../http/request-accounting.js'
import type { EventFeed, EventPage, EventQuery } from '../store/event-feed.js'
import {
  isLossOfAccess,
  mayHideLossOfAccess,
  readLostAccess,
  type StreamReader,
} from './stream-reader.js'

/** Events a stream reads from the feed at a time (a page is also bounded in bytes). */
export const STREAM_PAGE = 200
/** setTimeout's longest delay; a later deadline is re-armed when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1
/**
 * How often a stream whose filter may hide its reader's loss of access asks about the subject
 * while no event comes: a revocation must end it within 5 s of its answer (docs/events.md).
 */
const SUBJECT_CHECK_MS = 3000

export interface SseStreamOptions {
  readonly res: ServerResponse
  readonly feed: EventFeed
  /** The filters; `after` is where the first page began. */
  readonly query: EventQuery
  /** The first page, already read (so that an expired cursor was a plain 410). */
  readonly first: EventPage
  /** Bytes of frames a stream may hold for its consumer (about 1 MiB: docs/api.md's limits). */
  readonly maxBufferBytes: number
  /** How long a consumer that takes nothing of a full buffer has before it is cut off. */
  readonly stallMs: number
  readonly heartbeatMs: number
  /** Milliseconds since the epoch. */
  readonly now: () => number
  readonly reader?: StreamReader | undefined
}

/** A running stream. */
export interface SseStream {
  /** Resolves once the stream has ended or was cut off. */
  readonly done: Promise<void>
  /** Ends the stream cleanly, with a last comment saying why. */
  end(why: string): void
}

/**
 * Serves one stream of Server-Sent Events: the backlog, then live events. A frame is written only
 * while the socket drains and a page is read only when the buffer has room for it, so a consumer
 * that stops reading costs at most about `maxBufferBytes`; one that takes nothing for `stallMs` is
 * cut off and resumes with Last-Event-ID (docs/events.md).
 */
export function startSseStream(options: SseStreamOptions): SseStream {
  const { res, feed, query, maxBufferBytes, stallMs, now, reader } = options
  const watched = reader !== undefined && mayHideLossOfAccess(query, reader)
  let cursor = query.after
  let checking = false
  let done = false
  let pumping = false
  let again = false
  let waitingForDrain = false
  let expiry: NodeJS.Timeout | undefined
  let resolveDone = (): void => undefined
  const finished = new Promise<void>((resolve) => {
    resolveDone = resolve
  })

  const finish = (why: string | undefined): void => {
    if (done) return
    done = true
    clearInterval(beat)
    clearInterval(watch)
    clearTimeout(expiry)
    unsubscribe()
    if (why === undefined) res.destroy()
    else endCleanly(res, `: ${why}\n\n`, stallMs)
    resolveDone()
  }

  const expired = (): boolean => {
    if (reader === undefined || now() <= reader.expiresAtMs) return false
    finish('stream ended: the token has expired; reconnect with a new token and Last-Event-ID')
    return true
  }

  /** Ends the stream once its subject may no longer read; one check at a time. */
  const checkAccess = (): void => {
    if (checking || done) return
    checking = true
    void readLostAccess(reader).then((why) => {
      checking = false
      if (why !== undefined) finish(why)
    })
  }

  /** Waits until the socket has taken what is buffered; false when the consumer stalled and was cut off. */
  const drained = (): Promise<boolean> =>
    new Promise((resolve) => {
      if (res.destroyed) {
        resolve(false)
        return
      }
      waitingForDrain = true
      let left = res.writableLength
      const settle = (ok: boolean): void => {
        waitingForDrain = false
        clearTimeout(stall)
        res.off('drain', onDrain)
        res.off('close', onClose)
        resolve(ok)
      }
      const onDrain = (): void => {
        settle(true)
      }
      const onClose = (): void => {
        settle(false)
      }
      const check = (): void => {
        // A slow consumer that still takes data is given more time; one that takes nothing is cut.
        if (res.writableLength < left) {
          left = res.writableLength
          stall = setTimeout(check, stallMs)
          return
        }
        finish(undefined)
        settle(false)
      }
      let stall = setTimeout(check, stallMs)
      res.on('drain', onDrain)
      res.on('close', onClose)
    })

  /** Writes a page's frames (fewer when the buffer's room is smaller); false when the stream ended. */
  const send = async (page: EventPage, room: number): Promise<boolean> => {
    const frames: Buffer[] = []
    let bytes = 0
    let ended: string | undefined
    // A filtered stream may never see its reader's loss of access: the subject is read after the
    // page was, so a revocation committed before any event of the page ends the stream first (it
    // may end before events older than the revocation too: the client resumes with Last-Event-ID).
    if (watched && page.items.length > 0) {
      ended = await readLostAccess(reader)
      if (done) return false
      if (ended !== undefined) {
        finish(ended)
        return false
      }
    }
    for (const event of page.items) {
      // Events up to the subject's suspension, deletion or revocation are sent, none after it.
      if (isLossOfAccess(event, reader)) ended = await readLostAccess(reader)
      if (done) return false
      if (ended !== undefined) break
      const head = `id: ${event.id}\nevent: ${event.type}\ndata: `
      const frame = Buffer.from(`${head}${eventJson(event)}\n\n`)
      // Counted as the store counts maxBytes (the event JSON), so that a page it bounded fits whole.
      const size = frame.length - head.length - 2
      // A page holds at least one event; the rest waits for room.
      if (frames.length > 0 && bytes + size > room) break
      frames.push(frame)
      bytes += size
    }
    if (expired()) return false
    const last = page.items[frames.length - 1]
    cursor = frames.length === page.items.length ? page.nextCursor : (last?.id ?? cursor)
    // Not corked by hand: on Node 22 and 24, res.write() inside res.cork() holds a chunked body's
    // frames apart and answers whether those alone are under the high-water mark, whatever the
    // socket already holds, so a consumer that reads nothing was never waited for, never cut off,
    // and buffered the whole feed (Node 20 and 26 count the socket's bytes). Uncorked, write()
    // answers for the socket on every version, and node:http still batches one tick's writes.
    let more = true
    for (const frame of frames) more = res.write(frame)
    if (ended !== undefined) {
      finish(ended)
      return false
    }
    return more || drained()
  }

  /** Sends `first`, then pages until the feed has no more; a wake while it runs makes it go round again. */
  const pump = async (first?: EventPage): Promise<void> => {
    if (pumping) {
      again = true
      return
    }
    pumping = true
    try {
      if (first !== undefined && !(await send(first, maxBufferBytes))) return
      do {
        again = false
        // Until a page leaves the cursor where it was: pages are short by bytes, not only at the end.
        for (;;) {
          if (done || expired()) return
          const before = cursor
          const room = roomLeft(res, maxBufferBytes)
          const page = await feed.read({
            ...query,
            after: cursor,
            limit: STREAM_PAGE,
            maxBytes: room,
            live: true,
          })
          if (done || !(await send(page, room))) return
          if (cursor === before) break
        }
      } while (again)
    } catch {
      // A cursor pruned under a slow consumer, or a store that failed: it resumes with Last-Event-ID.
      finish(undefined)
    } finally {
      pumping = false
    }
  }

  const armExpiry = (): void => {
    if (reader === undefined || done) return
    expiry = setTimeout(
      () => {
        if (!expired()) armExpiry()
      },
      Math.min(Math.max(reader.expiresAtMs - now() + 1, 0), MAX_TIMER_MS),
    )
  }

  const beat = setInterval(() => {
    if (done || expired()) return
    // A consumer with data still buffered needs no keep-alive, and a stalled one gets no more bytes.
    if (!waitingForDrain && res.writableLength === 0) res.write(': keep-alive\n\n')
    checkAccess()
  }, options.heartbeatMs)
  // An unfiltered stream reads its subject's loss-of-access event as soon as the feed has it;
  // a filtered one is told by nothing, so it asks, also while its consumer drains.
  const watch = watched ? setInterval(checkAccess, SUBJECT_CHECK_MS) : undefined
  const unsubscribe = feed.subscribe(() => {
    void pump()
  })
  onAnswerClosed(res, () => {
    finish(undefined)
  })
  armExpiry()
  void pump(options.first)

  return {
    done: finished,
    end: (why) => {
      finish(why)
    },
  }
}

function roomLeft(res: ServerResponse, maxBufferBytes: number): number {
  return Math.max(maxBufferBytes - res.writableLength, 1)
}

/** Ends the response with a last comment; a consumer that never takes it is cut off after `stallMs`. */
function endCleanly(res: ServerResponse, comment: string, stallMs: number): void {
  if (res.destroyed) return
  const cut = setTimeout(() => {
    res.destroy()
  }, stallMs)
  res.once('close', () => {
    clearTimeout(cut)
  })
  res.once('finish', () => {
    clearTimeout(cut)
  })
  res.end(comment)
}
