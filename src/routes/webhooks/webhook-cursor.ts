import type { Reply } from '../../http/respond.js'
import { type ResponseDoc, type Route, ref } from '../route.js'
import { JSON_ONLY } from '../route-defaults.js'
import { WEBHOOK_ROUTE, webhookId } from './webhook-replies.js'

const CURSOR_ANSWER: ResponseDoc = {
  description: 'The id of the last event the endpoint is done with.',
  content: { 'application/json': ref('WebhookCursor') },
}

function cursorReply(after: string): Reply {
  return { status: 200, body: JSON.stringify({ after }) }
}

/** `GET /webhooks/{id}/cursor`: where delivery to the endpoint stands. */
export const getWebhookCursor: Route = {
  ...WEBHOOK_ROUTE,
  operationId: 'getWebhookCursor',
  method: 'GET',
  path: '/webhooks/{id}/cursor',
  cacheable: true,
  summary: "Read a webhook endpoint's cursor",
  responses: { 200: CURSOR_ANSWER },
  async handle(context) {
    return cursorReply(await context.services.webhooks.cursor(webhookId(context)))
  },
}

/** `PUT /webhooks/{id}/cursor`: where delivery goes on, to replay (earlier) or skip (later). */
export const putWebhookCursor: Route = {
  ...WEBHOOK_ROUTE,
  operationId: 'putWebhookCursor',
  method: 'PUT',
  path: '/webhooks/{id}/cursor',
  body: 'required',
  mediaTypes: JSON_ONLY,
  summary: "Move a webhook endpoint's cursor",
  request: { schema: ref('WebhookCursor') },
  responses: {
    200: {
      ...CURSOR_ANSWER,
      description:
        'Moved: the next event delivered is the first after it, once the attempt in flight, if any, ends.',
    },
  },
  // An event id older than the retained feed.
  errors: [410],
  async handle(context) {
    const { webhooks } = context.services
    return cursorReply(
      await webhooks.setCursor(webhookId(context), context.body, context.preconditions),
    )
  },
}
