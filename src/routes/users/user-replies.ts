import type { ChangeContext } from '../../domain/change-context.js'
import { internalFault } from '../../domain/errors.js'
import type { UserRecord } from '../../domain/user.js'
import type { Reply } from '../../http/respond.js'
import { type ResponseDoc, type Route, type RouteContext, ref } from '../route.js'
import { API_ROUTE, JSON_ONLY } from '../route-defaults.js'

/** The answer that carries one user: its JSON and its ETag. */
export function userReply(status: number, record: UserRecord): Reply {
  return { status, body: record.json, etag: record.etag }
}

/** The answer of a write that answers with the user it made (`status` and the user). */
export function userAnswer(status: number): (record: UserRecord | undefined) => Reply {
  return (record) => {
    if (record === undefined) throw internalFault('a write that answers with a user made none')
    return userReply(status, record)
  }
}

/**
 * The change context of a write that will answer `answerOf(record)`: with the request's
 * `Idempotency-Key`, when it has one, so that the store keeps that answer in the same step as the
 * change (undefined is the record of a deletion).
 */
export function keyedChange(
  context: RouteContext,
  answerOf: (record: UserRecord | undefined) => Reply,
): ChangeContext {
  const { key } = context
  if (key === undefined) return context.change
  return { ...context.change, idempotency: { keep: (record) => key.keep(answerOf(record)) } }
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

/**
 * What the item methods (`:activate`, `:suspend`, `:revokeTokens`) share: an admin's POST with an
 * empty body or `{}`, `If-Match` honoured, the whole user answered; a 409 for a change the user
 * cannot take (its status, or its highest version).
 */
export const ITEM_METHOD = {
  ...API_ROUTE,
  method: 'POST',
  scope: 'users:admin',
  body: 'optional',
  mediaTypes: JSON_ONLY,
  tagged: true,
  idempotencyKey: true,
  request: { schema: ref('EmptyBody') },
  responses: { 200: USER_ANSWER },
  errors: [409],
} as const satisfies Partial<Route>
