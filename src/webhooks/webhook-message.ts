/**
 * What one delivery of an event sends (docs/webhooks.md): the Standard Webhooks body, the same
 * bytes on every attempt to every endpoint, and the three headers, signed by the endpoint's
 * current secret and, during a rotation's overlap, its previous one.
 */
import { type ChangeEvent, eventJson } from '../domain/event.js'
import type { StoredWebhook } from '../domain/webhook.js'
import { signatureHeader } from './signature.js'

/** `{"type":…,"timestamp":…,"data":<the event as GET /events shows it>}`, compact, as UTF-8. */
export function webhookBody(event: ChangeEvent): Buffer {
  const head = `{"type":${JSON.stringify(event.type)},"timestamp":${JSON.stringify(event.time)}`
  return Buffer.from(`${head},"data":${eventJson(event)}}`)
}

/** The receiver's idempotency key: the same on every attempt of the event, after a crash too. */
export function webhookId(eventId: string): string {
  return `msg_${eventId}`
}

/** The secrets that sign now: the current one, then the previous one until its overlap ends. */
export function signingSecrets(hook: StoredWebhook, nowMs: number): string[] {
  const expires = hook.endpoint.previousSecretExpiresAt
  const overlapping =
    hook.previousSecret !== null && expires !== null && Date.parse(expires) > nowMs
  return overlapping && hook.previousSecret !== null
    ? [hook.secret, hook.previousSecret]
    : [hook.secret]
}

/** webhook-id, webhook-timestamp (the attempt's time, Unix seconds) and webhook-signature. */
export function webhookHeaders(
  hook: StoredWebhook,
  eventId: string,
  body: Buffer,
  nowMs: number,
): Record<string, string> {
  const id = webhookId(eventId)
  const timestamp = Math.floor(nowMs / 1000)
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatureHeader(signingSecrets(hook, nowMs), id, timestamp, body),
  }
}
