import type { Route } from '../route.js'
import { WEBHOOK_ANSWER, WEBHOOK_ROUTE, webhookId, webhookReply } from './webhook-replies.js'

export const getWebhook: Route = {
  ...WEBHOOK_ROUTE,
  operationId: 'getWebhook',
  method: 'GET',
  path: '/webhooks/{id}',
  cacheable: true,
  tagged: true,
  summary: 'Read a webhook endpoint',
  responses: {
    200: WEBHOOK_ANSWER,
    304: { description: 'Not modified (If-None-Match matched).', headers: ['ETag'] },
  },
  // Its If-Match (412) and If-None-Match (304) are applied to this answer by app.ts.
  async handle(context) {
    return webhookReply(200, await context.services.webhooks.get(webhookId(context)))
  },
}
