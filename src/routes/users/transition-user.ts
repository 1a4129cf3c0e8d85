import type { LifecycleAction } from '../../domain/lifecycle.js'
import type { Route } from '../route.js'
import { ITEM_METHOD, keyedChange, userAnswer, userId } from './user-replies.js'

/** `POST /users/{id}:activate` and `:suspend`: one lifecycle action each. */
function transitionRoute(operationId: string, action: LifecycleAction, summary: string): Route {
  return {
    ...ITEM_METHOD,
    operationId,
    path: `/users/{id}:${action}`,
    summary,
    async handle(context) {
      const { operations } = context.services
      const answerOf = userAnswer(200)
      return answerOf(
        await operations.transition(
          userId(context),
          action,
          context.body,
          context.preconditions,
          keyedChange(context, answerOf),
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
