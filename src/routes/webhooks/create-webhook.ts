import { checkUntagged } from '../../domain/preconditions.js'
import { type Route, ref } from '../route.js'
import { JSON_ONLY } from '../route-defaults.js'
import { secretReply, WEBHOOK_ROUTE } from './webhook-replies.js'

/** `POST /webhooks`: a new endpoint, answered with its secret (the only time but a rotation). */
export const createWebhook: Route = {
  ...WEBHOOK_ROUTE,
  operationId: 'createWebhook',
  method: 'POST',
  path: '/webhooks',
  body: 'required',
  mediaTypes: JSON_ONLY,
  summary: 'Register a webhook endpoint',
  request: { schema: ref('WebhookCreate') },
  responses: {
    201: {
      description:
        'Created; its cursor is the head of the change feed. The secret is shown here and after a rotation only.',
      headers: ['ETag', 'Location'],
      content: { 'application/json': ref('WebhookWithSecret') },
    },
  },
  // WEBHOOKS_MAX endpoints exist already.
  errors: [409],
  async handle(context) {
    checkUntagged(context.preconditions, false)
    const { webhooks, basePath } = context.services
    const hook = await webhooks.create(context.body)
    return {
      ...secretReply(201, hook),
      headers: { location: `${basePath}/webhooks/${hook.endpoint.id}` },
    }
  },
}
