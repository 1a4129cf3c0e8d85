import { type Route, ref } from '../route.js'
import { API_ROUTE, JSON_ONLY } from '../route-defaults.js'
import { preconditions, USER_ANSWER, userId, userReply } from './user-replies.js'

export const replaceUser: Route = {
  ...API_ROUTE,
  operationId: 'replaceUser',
  method: 'PUT',
  path: '/users/{id}',
  scope: 'users:write',
  body: 'required',
  mediaTypes: JSON_ONLY,
  conditional: true,
  summary: 'Replace a user',
  request: { schema: ref('UserReplace') },
  responses: { 200: USER_ANSWER },
  // Another user's email, or a user at the highest version.
  errors: [409],
  async handle(context) {
    return userReply(
      200,
      await context.services.operations.replace(
        userId(context),
        context.body,
        preconditions(context),
        context.change,
      ),
    )
  },
}
