import type { Route } from '../route.js'
import { API_ROUTE } from '../route-defaults.js'
import { USER_ANSWER, userId, userReply } from './user-replies.js'

export const getUser: Route = {
  ...API_ROUTE,
  operationId: 'getUser',
  method: 'GET',
  path: '/users/{id}',
  scope: 'users:read',
  readsUser: 'id',
  cacheable: true,
  tagged: true,
  summary: 'Read a user',
  responses: {
    200: USER_ANSWER,
    304: { description: 'Not modified (If-None-Match matched).', headers: ['ETag'] },
  },
  // Its If-Match (412) and If-None-Match (304) are applied to this answer by app.ts.
  handle(context) {
    // Read with the token's subject check when it has a subject to check (readsUser).
    const { readUser } = context
    if (readUser !== undefined) return userReply(200, readUser())
    // The hottest route: one promise, no async frames.
    return context.services.operations.get(userId(context)).then((record) => userReply(200, record))
  },
}
