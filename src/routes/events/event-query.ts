import { EVENT_ID, EVENT_TYPES, type EventType } from '../../domain/event.js'
import { isCanonicalUuid } from '../../domain/uuid7.js'
import { HttpError } from '../../http/problem.js'
import { badParameter, readQueryParameters } from '../../http/query-parameters.js'
import type { EventQuery } from '../../store/event-feed.js'

export const EVENT_PARAMETERS = ['after', 'limit', 'type', 'userId'] as const
export const DEFAULT_EVENT_LIMIT = 100
export const MAX_EVENT_LIMIT = 1000

/**
 * The largest cursor every store holds exactly: PostgreSQL's largest bigint (its event ids are
 * bigints: docs/postgresql.md). A larger one is a 400, never rounded and never sent to a store.
 */
export const MAX_EVENT_CURSOR = '7fffffffffffffff'

/**
 * Parses `after`, `limit`, `type` and `userId` strictly, as the users list does: anything else is
 * a 400. `lastEventId` (the SSE header) stands in for a missing `after`.
 */
export function parseEventQuery(rawQuery: string, lastEventId: string | undefined): EventQuery {
  const params = readQueryParameters(rawQuery, EVENT_PARAMETERS, 'the feed')
  const afterText = params.get('after')
  const after =
    afterText !== undefined
      ? readCursor(afterText, (problem) => badParameter('after', problem))
      : lastEventId === undefined
        ? undefined
        : readCursor(lastEventId, badHeader)
  return {
    after,
    limit: readLimit(params.get('limit')),
    types: readTypes(params.get('type')),
    userId: readUserId(params.get('userId')),
  }
}

function readCursor(text: string, bad: (problem: string) => HttpError): string {
  if (!EVENT_ID.test(text))
    throw bad('must be a cursor or an event id from this feed (16 lower-case hex digits)')
  // Both are 16 lower-case hex digits: as text they compare exactly as the numbers do.
  if (text > MAX_EVENT_CURSOR)
    throw bad(`cannot be represented exactly: cursors go up to ${MAX_EVENT_CURSOR}`)
  return text
}

function readLimit(text: string | undefined): number {
  if (text === undefined) return DEFAULT_EVENT_LIMIT
  const limit = /^\d{1,4}$/.test(text) ? Number(text) : Number.NaN
  if (!(limit >= 1 && limit <= MAX_EVENT_LIMIT))
    throw badParameter('limit', `must be a whole number from 1 to ${MAX_EVENT_LIMIT}`)
  return limit
}

function readTypes(text: string | undefined): EventType[] | undefined {
  return text?.split(',').map((item) => {
    const type = EVENT_TYPES.find((candidate) => candidate === item.trim())
    if (type === undefined)
      throw badParameter('type', `must be a comma list of ${EVENT_TYPES.join(', ')}`)
    return type
  })
}

function readUserId(text: string | undefined): string | undefined {
  if (text !== undefined && !isCanonicalUuid(text))
    throw badParameter('userId', 'must be a user id (a lower-case UUID)')
  return text
}

/** The 400 for a malformed Last-Event-ID: it names the header, not a query parameter. */
function badHeader(problem: string): HttpError {
  return new HttpError('bad_request', `The header Last-Event-ID ${problem}.`)
}
