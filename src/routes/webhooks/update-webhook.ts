import { type Route, ref } from '../route.js'
import { MERGE_PATCH } from '../route-defaults.js'
import { WEBHOOK_ANSWER, WEBHOOK_ROUTE, webhookId, webhookReply } from './webhook-replies.js'

/** `PATCH /webhooks/{id}`: some fields, as a JSON Merge Patch; `enabled` pauses and resumes. */
export const updateWebhook: Route = {
  ...WEBHOOK_ROUTE,
  operationId: 'updateWebhook',
  method: 'PATCH',
  path: '/webhooks/{id}',
  body: 'required',
  mediaTypes: MERGE_PATCH,
  tagged: true,
  summary: 'Change some fields of a webhook endpoint (JSON Merge Patch)',
  request: { schema: ref('WebhookPatch') },
  responses: { 200: WEBHOOK_ANSWER },
  // Enabling an endpoint whose cursor fell behind the retained feed.
  errors: [410],
  async handle(context) {
    const { webhooks } = context.services
    const endpoint = await webhooks.patch(webhookId(context), context.body, context.preconditions)
    return webhookReply(200, endpoint)
  },
}
