import { EVENT_TYPES } from '../domain/event.js'
import { EVENT_CURSOR } from '../routes/events/list-events.js'
import { type Json, ref } from '../routes/route.js'

/** The feed's schemas (docs/events.md), merged into components.schemas. */
export function createEventSchemas(): Record<string, Json> {
  return {
    Event: {
      type: 'object',
      required: ['id', 'type', 'time', 'userId', 'version'],
      additionalProperties: false,
      description:
        'One change of one user. `user` is the user after the change, as GET shows it; a deletion carries no user (no personal data).',
      properties: {
        id: {
          ...EVENT_CURSOR,
          description:
            'Opaque; strictly increasing in commit order and never reused. Also a cursor.',
        },
        type: { type: 'string', enum: EVENT_TYPES },
        time: { type: 'string', format: 'date-time' },
        userId: { type: 'string', format: 'uuid' },
        version: {
          type: 'integer',
          minimum: 1,
          description: "The user's version after the change (a deletion: one past the last).",
        },
        actor: { type: 'string', description: 'The `sub` of the token that made the change.' },
        requestId: {
          type: 'string',
          description: 'The X-Request-Id of the request that made the change.',
        },
        changed: {
          type: 'array',
          items: { type: 'string' },
          description: 'user.updated only: the fields that changed.',
        },
        user: ref('User'),
      },
    },
    EventPage: {
      type: 'object',
      required: ['items', 'nextCursor'],
      additionalProperties: false,
      description:
        'Events oldest first; resume with after=nextCursor (never null, also on an empty page).',
      properties: {
        items: { type: 'array', items: ref('Event') },
        nextCursor: { ...EVENT_CURSOR, description: 'Pass it as after for the next page.' },
      },
    },
  }
}
