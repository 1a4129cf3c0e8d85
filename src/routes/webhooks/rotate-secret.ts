import { type Route, ref } from '../route.js'
import { JSON_ONLY } from '../route-defaults.js'
import { secretReply, WEBHOOK_ROUTE, webhookId } from './webhook-replies.js'

/**
 * `POST /webhooks/{id}:rotateSecret`: a new secret, answered once; the previous one signs beside
 * it for the overlap asked.
 */
export const rotateSecret: Route = {
  ...WEBHOOK_ROUTE,
  operationId: 'rotateWebhookSecret',
  method: 'POST',
  path: '/webhooks/{id}:rotateSecret',
  body: 'optional',
  mediaTypes: JSON_ONLY,
  tagged: true,
  summary: "Rotate a webhook endpoint's secret",
  request: { schema: ref('RotateSecret') },
  responses: {
    200: {
      description: 'The endpoint with its new secret, shown this once.',
      headers: ['ETag'],
      content: { 'application/json': ref('WebhookWithSecret') },
    },
  },
  async handle(context) {
    const { webhooks } = context.services
    const id = webhookId(context)
    return secretReply(200, await webhooks.rotateSecret(id, context.body, context.preconditions))
  },
}
