import type { StoredWebhook, WebhookEndpoint } from '../../domain/webhook.js'
import type { Reply } from '../../http/respond.js'
import { webhookEtag, webhookJson, webhookJsonWithSecret } from '../../webhooks/webhook-json.js'
import { type ResponseDoc, type Route, type RouteContext, ref } from '../route.js'
import { API_ROUTE } from '../route-defaults.js'

/** What every webhook route shares: the scope that stands alone, and its tag. */
export const WEBHOOK_ROUTE = {
  ...API_ROUTE,
  scope: 'webhooks:admin',
  tag: 'webhooks',
} as const satisfies Partial<Route>

/** The answer that carries one endpoint: its JSON (never a secret) and its ETag. */
export function webhookReply(status: number, endpoint: WebhookEndpoint): Reply {
  return { status, body: webhookJson(endpoint), etag: webhookEtag(endpoint) }
}

/** The answer of a create or a rotation: the endpoint with its secret, shown this once. */
export function secretReply(status: number, hook: StoredWebhook): Reply {
  return {
    status,
    body: webhookJsonWithSecret(hook.endpoint, hook.secret),
    etag: webhookEtag(hook.endpoint),
  }
}

export function webhookId(context: RouteContext): string {
  return context.params['id'] ?? ''
}

/** The documented answer of a route that answers with the endpoint. */
export const WEBHOOK_ANSWER: ResponseDoc = {
  description: 'The webhook endpoint.',
  headers: ['ETag'],
  content: { 'application/json': ref('Webhook') },
}
