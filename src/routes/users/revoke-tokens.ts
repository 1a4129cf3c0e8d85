import type { Route } from '../route.js'
import { ITEM_METHOD, keyedChange, userAnswer, userId } from './user-replies.js'

/**
 * `POST /users/{id}:revokeTokens`: the user's tokens issued before the next whole second are
 * refused from then on (docs/api.md, revoking tokens).
 */
export const revokeTokens: Route = {
  ...ITEM_METHOD,
  operationId: 'revokeTokens',
  path: '/users/{id}:revokeTokens',
  summary: 'Revoke every token of a user issued until now',
  async handle(context) {
    const { operations } = context.services
    const answerOf = userAnswer(200)
    return answerOf(
      await operations.revokeTokens(
        userId(context),
        context.body,
        context.preconditions,
        keyedChange(context, answerOf),
      ),
    )
  },
}
