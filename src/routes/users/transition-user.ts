import type { LifecycleAction } from '../../domain/lifecycle.js'
import { type Route, ref } from '../route.js'
import { API_ROUTE, JSON_ONLY } from '../route-defaults.js'
import { USER_ANSWER, userId, userReply } from './user-replies.js'

/** `POST /users/{id}:activate` and `:suspend`: one lifecycle action each. */
function transitionRoute(operationId: string, action: LifecycleAction, summary: string): Route {
  return {
    ...API_ROUTE,
    operationId,
    method: 'POST',
    path: `/users/{id}:${action}`,
    scope: 'users:admin',
    body: 'optional',
    mediaTypes: JSON_ONLY,
    conditional: true,
    summary,
    request: { schema: ref('EmptyBody') },
    responses: { 200: USER_ANSWER },
    // A transition the user's status does not allow, or a user at the highest version.
    errors: [409],
    async handle(context) {
      const { operations } = context.services
      return userReply(
        200,
        await operations.transition(
          userId(context),
          action,
          context.body,
          context.preconditions,
          context.change,
        ),
      )
    },
  }
}

export const activateUser = transitionRoute(
  'activateUser',
  'activate',
  'Activate a pending or suspended user',
)
export const suspendUser = transitionRoute('suspendUser', 'suspend', 'Suspend an active user')
