import type { IncomingMessage, ServerResponse } from 'node:http'

import { HttpError } from '../errors.js'
import type { Handler } from '../http/handler.js'
import { badParameter, readQueryParameters } from '../http/query-parameters.js'
import { isCanonicalUuid } from '../users/uuid7.js'
import { EVENT_ID, EVENT_TYPES, eventJson, type EventType } from './event.js'
import type { EventFeed, EventQuery } from './journal.js'

export const EVENT_PARAMETERS = ['after', 'limit', 'type', 'userId'] as const
export const DEFAULT_EVENT_LIMIT = 100
export const MAX_EVENT_LIMIT = 1000
/** Events a stream reads from the feed at a time. */
const STREAM_PAGE = 200

export interface EventRoutesOptions {
  /** The store's feed; undefined: a store without one (404). */
  feed: EventFeed | undefined
  /** Most streams open at once (default 100); one more is a 503 overloaded. */
  maxStreams?: number
  /** How often a stream sends a comment line when it has nothing else to send (default 15 s). */
  heartbeatMs?: number
  /** Bytes a stream may hold for a consumer before the consumer must take them (default 1 MiB). */
  maxBufferBytes?: number
  /** How long a consumer past that bound has to take its data before it is cut off (default 10 s). */
  stallMs?: number
  /** Told when a stream opens or closes (for /metrics). */
  onStreams?: (open: number) => void
}

export interface EventRoutes {
  readonly list: Handler
  /** True when the request asks for Server-Sent Events. */
  wantsStream(req: IncomingMessage): boolean
  /**
   * Serves a stream until the client goes, it is cut off, or close() is called. `headers`: a flat
   * name, value list sent too (CORS).
   */
  stream(req: IncomingMessage, res: ServerResponse, rawQuery: string, requestId: string, headers?: readonly string[]): Promise<void>
  readonly openStreams: number
  /** Ends every stream cleanly (shutdown). */
  close(): void
}

export function createEventRoutes(options: EventRoutesOptions): EventRoutes {
  const maxStreams = options.maxStreams ?? 100
  const heartbeatMs = options.heartbeatMs ?? 15_000
  const maxBuffer = options.maxBufferBytes ?? 1024 * 1024
  const stallMs = options.stallMs ?? 10_000
  const open = new Set<() => void>()
  let closed = false

  const requireFeed = (): EventFeed => {
    if (options.feed === undefined) throw new HttpError('not_found', 'This store keeps no change feed.')
    return options.feed
  }

  return {
    list: async ({ rawQuery }) => {
      const feed = requireFeed()
      const page = await feed.read(parseEventQuery(rawQuery, undefined))
      const items = page.items.map(eventJson).join(',')
      return { status: 200, body: `{"items":[${items}],"nextCursor":"${page.nextCursor}"}` }
    },

    wantsStream: (req) => req.method === 'GET' && (req.headers.accept ?? '').toLowerCase().includes('text/event-stream'),

    get openStreams() {
      return open.size
    },

    async stream(req, res, rawQuery, requestId, headers = []) {
      const feed = requireFeed()
      const lastEventId = req.headers['last-event-id']
      const query = parseEventQuery(rawQuery, typeof lastEventId === 'string' ? lastEventId : undefined)
      if (closed) throw new HttpError('shutting_down', 'The service is shutting down.')
      if (open.size >= maxStreams) {
        throw new HttpError('overloaded', `At most ${maxStreams} event streams may be open at once; try again later.`, {
          headers: { 'retry-after': '5' },
        })
      }
      // The first page is read before the answer starts, so that an expired cursor is a plain 410.
      let cursor = query.after
      const first = await feed.read({ ...query, after: cursor, limit: STREAM_PAGE })
      res.writeHead(200, [
        'content-type', 'text/event-stream; charset=utf-8',
        'cache-control', 'no-store',
        'x-request-id', requestId,
        // Proxies such as nginx would otherwise hold events back in their buffers.
        'x-accel-buffering', 'no',
        ...headers,
      ])
      res.flushHeaders()
      await new Promise<void>((resolve) => {
        let pumping = false
        let again = false
        let done = false
        let stall: NodeJS.Timeout | undefined
        const finish = (cut: boolean): void => {
          if (done) return
          done = true
          clearInterval(beat)
          clearTimeout(stall)
          unsubscribe()
          open.delete(end)
          options.onStreams?.(open.size)
          if (cut) res.destroy()
          else res.end()
          resolve()
        }
        const end = (): void => { finish(false) }
        /** Past the bound, the consumer has stallMs to take its data, or it is cut off. */
        const bounded = async (): Promise<void> => {
          if (res.writableLength < maxBuffer) return
          await new Promise<void>((drained) => {
            stall = setTimeout(() => { finish(true); drained() }, stallMs)
            res.once('drain', () => { clearTimeout(stall); drained() })
          })
        }
        const send = async (page: { items: readonly { id: string, type: EventType }[], nextCursor: string }, events: readonly string[]): Promise<void> => {
          let text = ''
          page.items.forEach((event, i) => {
            text += `id: ${event.id}\nevent: ${event.type}\ndata: ${events[i] ?? ''}\n\n`
          })
          cursor = page.nextCursor
          if (text !== '') res.write(text)
          await bounded()
        }
        const pump = async (): Promise<void> => {
          if (pumping) {
            again = true
            return
          }
          pumping = true
          try {
            do {
              again = false
              for (;;) {
                if (done) return
                const page = await feed.read({ ...query, after: cursor, limit: STREAM_PAGE })
                if (done) return
                await send(page, page.items.map(eventJson))
                if (page.items.length < STREAM_PAGE && page.nextCursor === cursor) break
                if (page.items.length === 0) break
              }
            } while (again)
          } catch {
            // A cursor pruned under a slow consumer, or a store that failed: it resumes with Last-Event-ID.
            finish(true)
          } finally {
            pumping = false
          }
        }
        const beat = setInterval(() => {
          if (done) return
          res.write(': keep-alive\n\n')
          void bounded()
        }, heartbeatMs)
        const unsubscribe = feed.subscribe(() => { void pump() })
        open.add(end)
        options.onStreams?.(open.size)
        res.on('close', () => { finish(true) })
        void send(first, first.items.map(eventJson)).then(() => pump())
      })
    },

    close() {
      closed = true
      for (const end of [...open]) end()
    },
  }
}

/** Parses `after`, `limit`, `type` and `userId` strictly, as the users list does: anything else is a 400. */
export function parseEventQuery(rawQuery: string, lastEventId: string | undefined): EventQuery {
  const params = readQueryParameters(rawQuery, EVENT_PARAMETERS, 'the feed')
  const after = params.get('after') ?? lastEventId?.trim()
  if (after !== undefined && !EVENT_ID.test(after)) {
    throw badParameter(params.has('after') ? 'after' : 'Last-Event-ID', 'must be a cursor or an event id from this feed')
  }
  const limitText = params.get('limit')
  const limit = limitText === undefined ? DEFAULT_EVENT_LIMIT : (/^\d{1,4}$/.test(limitText) ? Number(limitText) : Number.NaN)
  if (!(limit >= 1 && limit <= MAX_EVENT_LIMIT)) throw badParameter('limit', `must be a whole number from 1 to ${MAX_EVENT_LIMIT}`)
  const typeText = params.get('type')
  let types: EventType[] | undefined
  if (typeText !== undefined) {
    types = typeText.split(',').map((item) => {
      const type = EVENT_TYPES.find((candidate) => candidate === item.trim())
      if (type === undefined) throw badParameter('type', `must be a comma list of ${EVENT_TYPES.join(', ')}`)
      return type
    })
  }
  const userId = params.get('userId')
  if (userId !== undefined && !isCanonicalUuid(userId)) throw badParameter('userId', 'must be a user id (a lower-case UUID)')
  return { after, limit, types, userId }
}

