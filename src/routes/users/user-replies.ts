import type { UserRecord } from '../../domain/user.js'
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
