import { EVENT_TYPES, eventJson } from '../../domain/event.js'
import type { StreamRequest } from '../../event-streams/event-streams.js'
import { preferenceFor } from '../../http/accept.js'
import { EVENT_PAGE_MAX_BYTES } from '../../store/event-feed.js'
import { commaList, USER_ID } from '../parameter-schemas.js'
import { type Json, type Route, type RouteContext, ref, STREAMED } from '../route.js'
import { API_ROUTE, TEXT } from '../route-defaults.js'
import { DEFAULT_EVENT_LIMIT, MAX_EVENT_LIMIT, parseEventQuery } from './event-query.js'

/** The schema of a cursor or an event id. */
export const EVENT_CURSOR = {
  type: 'string',
  // 16 lower-case hex digits up to 7fffffffffffffff, the largest cursor every store holds exactly.
  pattern: '^[0-7][0-9a-f]{15}$',
  minLength: 16,
  maxLength: 16,
} as const

/** `GET /events`: the change feed (docs/events.md), a page as JSON or, asked with Accept, a live stream. */
export const listEvents: Route = {
  ...API_ROUTE,
  operationId: 'listEvents',
  method: 'GET',
  path: '/events',
  scope: 'events:read',
  tag: 'events',
  summary: 'Read the change feed, a page at a time or live (Accept: text/event-stream)',
  parameters: eventParameters(),
  responses: {
    200: {
      description:
        'A page of events; or, with Accept: text/event-stream, the backlog then each new event as it is committed (' +
        '`id:` the event id, `event:` its type, `data:` the event JSON), with a comment line at least every 15 s. ' +
        'At most MAX_EVENT_STREAMS streams (then 503 overloaded, which comes after the 401, 403 and 400 checks and is counted by the rate limits); a consumer that does not read is cut off and resumes with Last-Event-ID.',
      content: { 'application/json': ref('EventPage'), 'text/event-stream': TEXT },
    },
  },
  errors: [410],
  async handle(context) {
    const { res, services } = context
    if (wantsStream(context)) {
      // A store without a feed is a 404 before a malformed query is a 400, as on pages.
      services.events.requireFeed()
      const streamed = await services.events.stream(res, {
        query: parseEventQuery(context.rawQuery, lastEventIdOf(context)),
        requestId: context.requestId,
        preconditions: context.preconditions,
        headers: context.cors,
        token: streamToken(context),
      })
      return streamed === 'not_modified' ? { status: 304 } : STREAMED
    }
    const feed = services.events.requireFeed()
    const page = await feed.read({
      // Read on pages as on streams, so that one request means the same whatever it accepts.
      ...parseEventQuery(context.rawQuery, lastEventIdOf(context)),
      maxBytes: EVENT_PAGE_MAX_BYTES,
      scanBudget: services.scanBudget,
    })
    const items = page.items.map(eventJson).join(',')
    return { status: 200, body: `{"items":[${items}],"nextCursor":"${page.nextCursor}"}` }
  },
}

function lastEventIdOf({ headers }: RouteContext): string | undefined {
  const value = headers['last-event-id']
  return typeof value === 'string' ? value : undefined
}

/**
 * True when the request asks for Server-Sent Events by name, with a weight above 0 and no lower
 * than JSON's: `text/event-stream;q=0`, or JSON preferred, gets a page. A HEAD asks as its GET
 * would, and gets the stream's head (RFC 9110 §9.3.2).
 */
function wantsStream({ req }: RouteContext): boolean {
  const accept = req.headers.accept
  if (accept === undefined) return false
  const stream = preferenceFor(accept, 'text/event-stream')
  return (
    stream.named &&
    stream.weight > 0 &&
    stream.weight >= preferenceFor(accept, 'application/json').weight
  )
}

/** A stream outlives its request's checks: it ends at the token's expiry or its subject's loss of access. */
function streamToken({ claims, services }: RouteContext): StreamRequest['token'] {
  if (claims === undefined) return undefined
  return {
    sub: claims.sub,
    exp: claims.exp,
    checkSubject: () => services.operations.checkSubject(claims.sub, claims.iat),
  }
}

function eventParameters(): Json[] {
  const query = (name: string, schema: Json, description: string): Json => ({
    name,
    in: 'query',
    required: false,
    schema,
    description,
  })
  const type = EVENT_TYPES.join('|').replaceAll('.', '\\.')
  return [
    query(
      'after',
      EVENT_CURSOR,
      'Only events after this cursor or event id; a cursor older than the retained feed is 410 cursor_expired. Each parameter at most once; an unknown, empty or malformed one is 400 bad_request.',
    ),
    query(
      'limit',
      { type: 'integer', minimum: 1, maximum: MAX_EVENT_LIMIT, default: DEFAULT_EVENT_LIMIT },
      'Events per page.',
    ),
    query('type', commaList(type), 'One event type or a comma list.'),
    query('userId', USER_ID, 'The events of one user.'),
    {
      name: 'Last-Event-ID',
      in: 'header',
      required: false,
      schema: EVENT_CURSOR,
      description:
        'Only events after this one, as after does (an SSE client sends it when it reconnects); after wins when both are sent.',
    },
  ]
}
