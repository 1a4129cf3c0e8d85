import type { Preconditions } from '../../domain/preconditions.js'
import type { UserRecord } from '../../domain/user.js'
import { HttpError } from '../../http/problem.js'
import type { Reply } from '../../http/respond.js'
import { type ResponseDoc, type RouteContext, ref } from '../route.js'

/** The answer that carries one user: its JSON and its ETag. */
export function userReply(status: number, record: UserRecord): Reply {
  return { status, body: record.json, etag: record.etag }
}

/** The documented answer of a route that answers with the user. */
export const USER_ANSWER: ResponseDoc = {
  description: 'The user.',
  headers: ['ETag'],
  content: { 'application/json': ref('User') },
}

export function userId(context: RouteContext): string {
  return context.params['id'] ?? ''
}

export function preconditions(context: RouteContext): Preconditions {
  return { ifMatch: header(context, 'if-match'), ifNoneMatch: header(context, 'if-none-match') }
}

/**
 * A precondition header as sent; an empty one (Node strips the white space around a value) names
 * no tag and no `*`, so it is a malformed request, not a precondition that fails or holds.
 */
function header(context: RouteContext, name: 'if-match' | 'if-none-match'): string | undefined {
  const value = context.headers[name]
  if (typeof value !== 'string') return undefined
  if (value.trim() === '')
    throw new HttpError('bad_request', `The header ${HEADER_NAMES[name]} is empty.`)
  return value
}

const HEADER_NAMES = { 'if-match': 'If-Match', 'if-none-match': 'If-None-Match' } as const
