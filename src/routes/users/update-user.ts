import { type Route, ref } from '../route.js'
import { API_ROUTE, MERGE_PATCH } from '../route-defaults.js'
import { preconditions, USER_ANSWER, userId, userReply } from './user-replies.js'

export const updateUser: Route = {
  ...API_ROUTE,
  operationId: 'updateUser',
  method: 'PATCH',
  path: '/users/{id}',
  scope: 'users:write',
  body: 'required',
  mediaTypes: MERGE_PATCH,
  conditional: true,
  summary: 'Change some fields of a user (JSON Merge Patch)',
  request: { schema: ref('UserPatch') },
  responses: { 200: USER_ANSWER },
  // Another user's email, or a user at the highest version.
  errors: [409],
  async handle(context) {
    return userReply(
      200,
      await context.services.operations.patch(
        userId(context),
        context.body,
        preconditions(context),
        context.change,
      ),
    )
  },
}
