import type { Route } from '../route.js'
import { API_ROUTE } from '../route-defaults.js'
import { userId } from './user-replies.js'

export const deleteUser: Route = {
  ...API_ROUTE,
  operationId: 'deleteUser',
  method: 'DELETE',
  path: '/users/{id}',
  scope: 'users:write',
  conditional: true,
  summary: 'Delete a user',
  responses: { 204: { description: 'Deleted.' } },
  async handle(context) {
    await context.services.operations.remove(userId(context), context.preconditions, context.change)
    return { status: 204 }
  },
}
