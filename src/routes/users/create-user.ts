import { type Route, ref } from '../route.js'
import { API_ROUTE, JSON_ONLY } from '../route-defaults.js'
import { userReply } from './user-replies.js'

export const createUser: Route = {
  ...API_ROUTE,
  operationId: 'createUser',
  method: 'POST',
  path: '/users',
  scope: 'users:write',
  body: 'required',
  mediaTypes: JSON_ONLY,
  summary: 'Create a user',
  request: { schema: ref('UserCreate') },
  responses: {
    201: {
      description: 'Created.',
      headers: ['ETag', 'Location'],
      content: { 'application/json': ref('User') },
    },
  },
  // Another user's email.
  errors: [409],
  async handle(context) {
    const record = await context.services.operations.create(context.body, context.change)
    return {
      ...userReply(201, record),
      headers: { location: `${context.services.basePath}/users/${record.user.id}` },
    }
  },
}
