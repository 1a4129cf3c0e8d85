import { randomBytes } from 'node:crypto'

import { formatEventId } from '../../src/domain/event.js'
import { createIdGenerator } from '../../src/domain/uuid7.js'
import type { DeliveryAttempt, StoredWebhook, WebhookEndpoint } from '../../src/domain/webhook.js'

/**
 * Webhook endpoints and attempts for store tests, built as the service builds them (UUIDv7 ids).
 * No node:test import here: the cursor writer child process uses it too.
 */
const nextId = createIdGenerator()

/** A secret as the service makes them: `whsec_` and the base64 of 32 random bytes. */
export function makeSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`
}

/** A new, enabled version-1 endpoint with a fresh UUIDv7 id; `fields` override the endpoint's. */
export function makeWebhook(fields: Partial<WebhookEndpoint> = {}): StoredWebhook {
  const { id, ms } = nextId(Date.now())
  const at = new Date(ms).toISOString()
  return {
    endpoint: {
      id,
      url: `https://hooks.example.com/${id}?source=test`,
      eventTypes: null,
      description: '',
      enabled: true,
      disabledReason: null,
      disabledAt: null,
      previousSecretExpiresAt: null,
      createdAt: at,
      updatedAt: at,
      version: 1,
      ...fields,
    },
    secret: makeSecret(),
    previousSecret: null,
  }
}

/** The endpoint with `fields` changed and its version one higher, as an operation makes it. */
export function changeWebhook(
  hook: StoredWebhook,
  fields: Partial<WebhookEndpoint> = {},
  secrets: Partial<Pick<StoredWebhook, 'secret' | 'previousSecret'>> = {},
): StoredWebhook {
  return {
    ...hook,
    ...secrets,
    endpoint: {
      ...hook.endpoint,
      ...fields,
      version: hook.endpoint.version + 1,
      updatedAt: new Date().toISOString(),
    },
  }
}

/** An attempt of the event numbered `event` (the `n`th of it), with a fresh UUIDv7 id. */
export function makeAttempt(event: number, n = 1, fields: Partial<DeliveryAttempt> = {}) {
  const eventId = formatEventId(event)
  const attempt: DeliveryAttempt = {
    id: nextId(Date.now()).id,
    webhookId: `msg_${eventId}`,
    eventId,
    eventType: 'user.created',
    attempt: n,
    time: new Date().toISOString(),
    durationMs: 12,
    result: 'failed',
    responseStatus: 500,
    error: 'status',
    response: '{"error":"db down"}',
    ...fields,
  }
  return attempt
}
