import type { EventType } from './event.js'

/** Why an endpoint is disabled: by a client, or by the service (docs/webhooks.md). */
export const DISABLED_REASONS = ['manual', 'failing', 'gone', 'cursor_expired'] as const
export type DisabledReason = (typeof DISABLED_REASONS)[number]

/** A webhook endpoint as the API shows it (never with a secret). */
export interface WebhookEndpoint {
  readonly id: string
  readonly url: string
  /** null: every event type, also types added later. */
  readonly eventTypes: readonly EventType[] | null
  readonly description: string
  readonly enabled: boolean
  readonly disabledReason: DisabledReason | null
  readonly disabledAt: string | null
  readonly previousSecretExpiresAt: string | null
  readonly createdAt: string
  readonly updatedAt: string
  readonly version: number
}

/**
 * An endpoint as it is stored: what the API shows and the secrets that sign its deliveries, the
 * current one and, during a rotation's overlap, the previous one (until previousSecretExpiresAt).
 */
export interface StoredWebhook {
  readonly endpoint: WebhookEndpoint
  /** `whsec_` and the base64 of 32 random bytes. */
  readonly secret: string
  readonly previousSecret: string | null
}

export const DELIVERY_ERRORS = [
  'status',
  'timeout',
  'connection_failed',
  'dns_failed',
  'private_address',
] as const
export type DeliveryError = (typeof DELIVERY_ERRORS)[number]

/** One attempt to deliver one event to one endpoint: an entry of its delivery log. */
export interface DeliveryAttempt {
  /** A UUIDv7: attempts sort by it, newest last. */
  readonly id: string
  /** `msg_<event id>`: the same on every attempt of the event. */
  readonly webhookId: string
  readonly eventId: string
  readonly eventType: EventType
  /** The attempts of that event to that endpoint, from 1. */
  readonly attempt: number
  readonly time: string
  readonly durationMs: number
  readonly result: 'succeeded' | 'failed'
  /** The answer's status, or null when none came. */
  readonly responseStatus: number | null
  readonly error: DeliveryError | null
  /** The first 1 KiB of the answer's body as text, "" when there was none. */
  readonly response: string
}

/**
 * One entry of the delivery log as JSON, its fields in the documented order: the API's item and
 * the file store's log line alike.
 */
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
