import { toEtag } from '../domain/user.js'
import type { WebhookEndpoint } from '../domain/webhook.js'

/** An endpoint as the API shows it, its fields in the documented order (never a secret). */
export function webhookJson(endpoint: WebhookEndpoint): string {
  return JSON.stringify(ordered(endpoint))
}

/** The answer of a create or a rotation: the endpoint and its (new) secret, shown this once. */
export function webhookJsonWithSecret(endpoint: WebhookEndpoint, secret: string): string {
  return JSON.stringify({ ...ordered(endpoint), secret })
}

/** The strong ETag of an endpoint: it follows `version`, as a user's does. */
export function webhookEtag(endpoint: WebhookEndpoint): string {
  return toEtag(endpoint.version)
}

function ordered(endpoint: WebhookEndpoint): Record<string, unknown> {
  return {
    id: endpoint.id,
    url: endpoint.url,
    eventTypes: endpoint.eventTypes,
    description: endpoint.description,
    enabled: endpoint.enabled,
    disabledReason: endpoint.disabledReason,
    disabledAt: endpoint.disabledAt,
    previousSecretExpiresAt: endpoint.previousSecretExpiresAt,
    createdAt: endpoint.createdAt,
    updatedAt: endpoint.updatedAt,
    version: endpoint.version,
  }
}
