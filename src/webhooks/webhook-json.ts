import { toEtag } from '../domain/user.js'
import type { DeliveryAttempt, WebhookEndpoint } from '../domain/webhook.js'

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

/** One entry of the delivery log, its fields in the documented order. */
export function attemptJson(attempt: DeliveryAttempt): string {
  return JSON.stringify({
    id: attempt.id,
    webhookId: attempt.webhookId,
    eventId: attempt.eventId,
    eventType: attempt.eventType,
    attempt: attempt.attempt,
    time: attempt.time,
    durationMs: attempt.durationMs,
    result: attempt.result,
    responseStatus: attempt.responseStatus,
    error: attempt.error,
    response: attempt.response,
  })
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
