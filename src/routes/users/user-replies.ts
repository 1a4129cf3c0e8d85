import type { UserRecord } from '../../domain/user.js'
import type { Reply } from '../../http/respond.js'
import { type ResponseDoc, type Route, type RouteContext, ref } from '../route.js'
import { API_ROUTE, JSON_ONLY } from '../route-defaults.js'

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
  conditional: true,
  request: { schema: ref('EmptyBody') },
  responses: { 200: USER_ANSWER },
  errors: [409],
} as const satisfies Partial<Route>
