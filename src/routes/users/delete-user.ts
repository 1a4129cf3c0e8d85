import type { Reply } from '../../http/respond.js'
import type { Route } from '../route.js'
import { API_ROUTE } from '../route-defaults.js'
import { keyedChange, userId } from './user-replies.js'

const DELETED: Reply = { status: 204 }

export const deleteUser: Route = {
  ...API_ROUTE,
  operationId: 'deleteUser',
  method: 'DELETE',
  path: '/users/{id}',
  scope: 'users:write',
  tagged: true,
  idempotencyKey: true,
  summary: 'Delete a user',
  responses: { 204: { description: 'Deleted.' } },
  async handle(context) {
    await context.services.operations.remove(
      userId(context),
      context.preconditions,
      keyedChange(context, () => DELETED),
    )
    return DELETED
  },
}
