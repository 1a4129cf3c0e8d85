import { type Route, ref } from '../route.js'
import { API_ROUTE, JSON_ONLY } from '../route-defaults.js'
import { USER_ANSWER, userId, userReply } from './user-replies.js'

/**
 * `POST /users/{id}:revokeTokens`: the user's tokens issued before the next whole second are
 * refused from then on (docs/api.md, revoking tokens).
 */
export const revokeTokens: Route = {
  ...API_ROUTE,
  operationId: 'revokeTokens',
  method: 'POST',
  path: '/users/{id}:revokeTokens',
  scope: 'users:admin',
  body: 'optional',
  mediaTypes: JSON_ONLY,
  conditional: true,
  summary: 'Revoke every token of a user issued until now',
  request: { schema: ref('EmptyBody') },
  responses: { 200: USER_ANSWER },
  // A user at the highest version.
  errors: [409],
  async handle(context) {
    const { operations } = context.services
    return userReply(
      200,
      await operations.revokeTokens(
        userId(context),
        context.body,
        context.preconditions,
        context.change,
      ),
    )
  },
}
