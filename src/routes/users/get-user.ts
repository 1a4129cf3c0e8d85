import { evaluatePreconditions } from '../../domain/preconditions.js'
import type { Route } from '../route.js'
import { API_ROUTE } from '../route-defaults.js'
import { preconditions, USER_ANSWER, userId, userReply } from './user-replies.js'

export const getUser: Route = {
  ...API_ROUTE,
  operationId: 'getUser',
  method: 'GET',
  path: '/users/{id}',
  scope: 'users:read',
  cacheable: true,
  conditional: true,
  summary: 'Read a user',
  responses: {
    200: USER_ANSWER,
    304: { description: 'Not modified (If-None-Match matched).', headers: ['ETag'] },
  },
  handle(context) {
    const conditions = preconditions(context)
    // The hottest route: one promise, no async frames.
    return context.services.operations
      .get(userId(context), conditions)
      .then((record) =>
        conditions.ifNoneMatch !== undefined &&
        evaluatePreconditions(conditions, record.etag, true) === 'not_modified'
          ? { status: 304, etag: record.etag }
          : userReply(200, record),
      )
  },
}
