import type { Reply } from '../../http/respond.js'
import type { Route } from '../route.js'
import { WEBHOOK_ROUTE, webhookId } from './webhook-replies.js'

const DELETED: Reply = { status: 204 }

/** `DELETE /webhooks/{id}`: the endpoint, its cursor and its log; no attempt starts after. */
export const deleteWebhook: Route = {
  ...WEBHOOK_ROUTE,
  operationId: 'deleteWebhook',
  method: 'DELETE',
  path: '/webhooks/{id}',
  tagged: true,
  summary: 'Delete a webhook endpoint',
  responses: { 204: { description: 'Deleted; no delivery to it starts after this answer.' } },
  async handle(context) {
    await context.services.webhooks.remove(webhookId(context), context.preconditions)
    return DELETED
  },
}
