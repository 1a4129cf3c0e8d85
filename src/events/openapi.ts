import { EVENT_TYPES } from '../domain/event.js'
import { DEFAULT_EVENT_LIMIT, MAX_EVENT_LIMIT } from './routes.js'

type Json = Readonly<Record<string, unknown>>

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` })
const CURSOR = { type: 'string', pattern: '^[0-9a-f]{16}$' } as const

/** The feed's schemas (§10), merged into components.schemas. */
export function createEventSchemas(): Record<string, Json> {
  return {
    Event: {
      type: 'object', required: ['id', 'type', 'time', 'userId', 'version'], additionalProperties: false,
      description: 'One change of one user. `user` is the user after the change, as GET shows it; a deletion carries no user (no personal data).',
      properties: {
        id: { ...CURSOR, description: 'Opaque; strictly increasing in commit order and never reused. Also a cursor.' },
        type: { type: 'string', enum: EVENT_TYPES },
        time: { type: 'string', format: 'date-time' },
        userId: { type: 'string', format: 'uuid' },
        version: { type: 'integer', minimum: 1, description: 'The user\'s version after the change (a deletion: one past the last).' },
        actor: { type: 'string', description: 'The `sub` of the token that made the change.' },
        requestId: { type: 'string', description: 'The X-Request-Id of the request that made the change.' },
        changed: { type: 'array', items: { type: 'string' }, description: 'user.updated only: the fields that changed.' },
        user: ref('User'),
      },
    },
    EventPage: {
      type: 'object', required: ['items', 'nextCursor'], additionalProperties: false,
      description: 'Events oldest first; resume with after=nextCursor (never null, also on an empty page).',
      properties: {
        items: { type: 'array', items: ref('Event') },
        nextCursor: { ...CURSOR, description: 'Pass it as after for the next page.' },
      },
    },
  }
}

export function eventParameters(): Json[] {
  const query = (name: string, schema: Json, description: string): Json => ({ name, in: 'query', required: false, schema, description })
  const type = `(${EVENT_TYPES.join('|').replaceAll('.', '\\.')})`
  return [
    query('after', CURSOR, 'Only events after this cursor or event id; a cursor older than the retained feed is 410 cursor_expired. Each parameter at most once; an unknown, empty or malformed one is 400 bad_request.'),
    query('limit', { type: 'integer', minimum: 1, maximum: MAX_EVENT_LIMIT, default: DEFAULT_EVENT_LIMIT }, 'Events per page.'),
    query('type', { type: 'string', pattern: `^\\s*${type}\\s*(,\\s*${type}\\s*)*$` }, 'One event type or a comma list.'),
    query('userId', { type: 'string', format: 'uuid' }, 'The events of one user.'),
    {
      name: 'Last-Event-ID', in: 'header', required: false, schema: CURSOR,
      description: 'With Accept: text/event-stream: resume after this event (as after does); after wins when both are sent.',
    },
  ]
}

/** The 200 of GET /events: a page as JSON, or a live stream of Server-Sent Events. */
export function eventSuccess(headers: Json): Record<string, Json> {
  return {
    200: {
      description: 'A page of events; or, with Accept: text/event-stream, the backlog then each new event as it is committed ('
        + '`id:` the event id, `event:` its type, `data:` the event JSON), with a comment line at least every 15 s. '
        + 'At most MAX_EVENT_STREAMS streams (then 503 overloaded); a consumer that does not read is cut off and resumes with Last-Event-ID.',
      headers,
      content: {
        'application/json': { schema: ref('EventPage') },
        'text/event-stream': { schema: { type: 'string' } },
      },
    },
  }
}
