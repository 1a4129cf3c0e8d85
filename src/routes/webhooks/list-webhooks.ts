import { readQueryParameters } from '../../http/query-parameters.js'
import { webhookJson } from '../../webhooks/webhook-json.js'
import { type Route, ref } from '../route.js'
import { WEBHOOK_ROUTE } from './webhook-replies.js'

/** `GET /webhooks`: every endpoint, oldest first, in one page (there are at most WEBHOOKS_MAX). */
export const listWebhooks: Route = {
  ...WEBHOOK_ROUTE,
  operationId: 'listWebhooks',
  method: 'GET',
  path: '/webhooks',
  cacheable: true,
  summary: 'List every webhook endpoint',
  responses: {
    200: {
      description:
        'Every endpoint, oldest first, in one page (nextCursor is null). Never a secret.',
      content: { 'application/json': ref('WebhookPage') },
    },
  },
  async handle(context) {
    readQueryParameters(context.rawQuery, [], 'the list of webhook endpoints')
    const endpoints = await context.services.webhooks.list()
    return {
      status: 200,
      body: `{"items":[${endpoints.map(webhookJson).join(',')}],"nextCursor":null}`,
    }
  },
}
