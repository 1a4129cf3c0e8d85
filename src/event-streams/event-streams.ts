import type { ServerResponse } from 'node:http'

import { checkUntagged, NO_PRECONDITIONS, type Preconditions } from '../domain/preconditions.js'
import { HttpError } from '../http/problem.js'
import { onAnswerClosed } from '../http/request-accounting.js'
import { shuttingDown } from '../ops/availability.js'
import { createLocalSlots, type SharedSlots } from '../ops/shared-slots.js'
import {
  EVENT_PAGE_MAX_BYTES,
  type EventFeed,
  type EventPage,
  type EventQuery,
} from '../store/event-feed.js'
import { type SseStream, STREAM_PAGE, startSseStream } from './sse-stream.js'
import type { StreamReader } from './stream-reader.js'

export interface EventStreamsOptions {
  /** The store's feed; undefined: a store without one (404). */
  feed: EventFeed | undefined
  /** Most streams open at once (MAX_EVENT_STREAMS); one more is a 503 overloaded. */
  maxStreams: number
  /** Where the streams are counted against maxStreams: default this process; with WORKERS > 1, the service. */
  slots?: SharedSlots | undefined
  /** How often a stream sends a comment line when it has nothing else to send (default 15 s). */
  heartbeatMs?: number
  /** Bytes a stream may hold for a consumer before the consumer must take them (default 1 MiB). */
  maxBufferBytes?: number
  /** How long a consumer that takes nothing of its buffer has before it is cut off (default 10 s). */
  stallMs?: number
  /** How long past its `exp` a token is still honoured, as the authenticator does. */
  leewaySeconds: number
  /** Milliseconds since the epoch: when a stream's token expires. */
  now: () => number
  /** Told when a stream opens or closes (for /metrics). */
  onStreams?: (open: number) => void
}

/** What the request listener knows of a stream's request once its token passed. */
export interface StreamRequest {
  /** The stream's filters and where it starts (`after`, or Last-Event-ID), parsed by the route. */
  readonly query: EventQuery
  readonly requestId: string
  /**
   * If-Match and If-None-Match, checked once the first page is read and before the head is sent
   * (a stream has no ETag: only `*` matches); none when left out.
   */
  readonly preconditions?: Preconditions | undefined
  /** A flat name, value list sent too (CORS). */
  readonly headers?: readonly string[] | undefined
  /** The verified token: the stream ends at its `exp` (plus the leeway) or when its subject loses access. */
  readonly token?:
    | {
        readonly sub: string
        /** Seconds since the epoch. */
        readonly exp: number
        /** Rejects with token_revoked, subject_suspended or subject_deleted; undefined for a sub that names no user. */
        checkSubject(): Promise<void> | undefined
      }
    | undefined
}

/** The change feed's live streams (docs/events.md). */
export interface EventStreams {
  /** The store's feed, or a 404 for a store without one. */
  requireFeed(): EventFeed
  /**
   * Serves a stream until the client goes, it is cut off or ended, or close() is called; or sends
   * nothing and resolves `not_modified` when If-None-Match is `*`, for the caller to answer 304.
   */
  stream(res: ServerResponse, request: StreamRequest): Promise<'streamed' | 'not_modified'>
  readonly openStreams: number
  /** Ends every stream cleanly (shutdown). */
  close(): void
}

export function createEventStreams(options: EventStreamsOptions): EventStreams {
  const { maxStreams, now } = options
  const heartbeatMs = options.heartbeatMs ?? 15_000
  const maxBufferBytes = options.maxBufferBytes ?? EVENT_PAGE_MAX_BYTES
  const stallMs = options.stallMs ?? 10_000
  const leewayMs = options.leewaySeconds * 1000
  const open = new Set<SseStream>()
  const slots = options.slots ?? createLocalSlots()
  let closed = false

  const requireFeed = (): EventFeed => {
    if (options.feed === undefined)
      throw new HttpError('not_found', 'This store keeps no change feed.')
    return options.feed
  }

  const counted = (): void => {
    options.onStreams?.(open.size)
  }

  return {
    requireFeed,

    get openStreams() {
      return open.size
    },

    async stream(res, request) {
      const feed = requireFeed()
      const { query } = request
      if (closed) throw shuttingDown()
      // Taken as the stream starts, so that no burst passes maxStreams (counted by every worker's
      // primary with WORKERS > 1); given back when its answer ends, however it ends.
      const slot = await slots.acquire('event-streams', maxStreams)
      if (slot === undefined) {
        throw new HttpError(
          'overloaded',
          `At most ${maxStreams} event streams may be open at once; try again later.`,
          {
            headers: { 'retry-after': '5' },
          },
        )
      }
      onAnswerClosed(res, () => slot.release())
      // The first page is read before the answer starts, so that an expired cursor is a plain 410.
      const first: EventPage = await feed.read({
        ...query,
        limit: STREAM_PAGE,
        maxBytes: maxBufferBytes,
      })
      if (closed) throw shuttingDown()
      if (checkUntagged(request.preconditions ?? NO_PRECONDITIONS, true) === 'not_modified') {
        return 'not_modified'
      }
      res.writeHead(200, [
        'content-type',
        'text/event-stream; charset=utf-8',
        'cache-control',
        'no-store',
        'x-request-id',
        request.requestId,
        // Proxies such as nginx would otherwise hold events back in their buffers.
        'x-accel-buffering',
        'no',
        ...(request.headers ?? []),
      ])
      // A HEAD gets the head its GET would get (RFC 9110 §9.3.2), and no stream.
      if (res.req.method === 'HEAD') {
        res.end()
        return 'streamed'
      }
      res.flushHeaders()
      const token = request.token
      const reader: StreamReader | undefined =
        token === undefined
          ? undefined
          : {
              sub: token.sub,
              expiresAtMs: token.exp * 1000 + leewayMs,
              checkSubject: () => token.checkSubject(),
            }
      const stream = startSseStream({
        res,
        feed,
        query,
        first,
        maxBufferBytes,
        stallMs,
        heartbeatMs,
        now,
        reader,
      })
      open.add(stream)
      counted()
      await stream.done
      open.delete(stream)
      counted()
      return 'streamed'
    },

    close() {
      closed = true
      for (const stream of [...open])
        stream.end('stream ended: the service is shutting down; reconnect with Last-Event-ID')
    },
  }
}
