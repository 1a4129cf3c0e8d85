import { EVENT_TYPES, type EventType } from '../domain/event.js'
import { type Json, ref } from '../routes/route.js'
import { payloadName } from './webhook-schemas.js'

/**
 * The document's top-level `webhooks` (OpenAPI 3.1): what the service sends to an endpoint, one
 * entry per event type, with the Standard Webhooks headers (docs/webhooks.md, what is sent).
 */
export function createWebhookPayloads(): Record<string, Json> {
  return Object.fromEntries(EVENT_TYPES.map((type) => [type, { post: delivery(type) }]))
}

function delivery(type: EventType): Json {
  return {
    operationId: `deliver${payloadName(type).replace(/Delivery$/, '')}`,
    summary: `A ${type} event, delivered to an endpoint`,
    description:
      `One POST per ${type} event to each endpoint whose eventTypes include it (or are null), ` +
      'in feed order, one at a time per endpoint, at least once: the same webhook-id and body on ' +
      'every attempt. Verify it with any Standard Webhooks library and the secret of the endpoint.',
    tags: ['webhooks'],
    security: [],
    parameters: [
      header(
        'webhook-id',
        { type: 'string', pattern: '^msg_[0-9a-f]{16}$' },
        'msg_ and the event id: the same on every attempt, a retry or a redelivery after a crash; an idempotency key.',
      ),
      header(
        'webhook-timestamp',
        { type: 'string', pattern: '^[0-9]+$' },
        "The attempt's time, integer Unix seconds.",
      ),
      header(
        'webhook-signature',
        { type: 'string', pattern: '^v1,[A-Za-z0-9+/]+={0,2}( v1,[A-Za-z0-9+/]+={0,2})?$' },
        "v1, and the base64 HMAC-SHA256 of <webhook-id>.<webhook-timestamp>.<body> keyed with the decoded secret; during a rotation's overlap a second one by the previous secret, space separated, the current first.",
      ),
    ],
    requestBody: {
      required: true,
      content: { 'application/json': { schema: ref(payloadName(type)) } },
    },
    responses: {
      '200': {
        description:
          'Any 2xx acknowledges the event: the cursor moves past it. Anything else (3xx included; redirects are never followed), a time-out or a failed connection fails the attempt, which is retried on WEBHOOK_RETRY_SCHEDULE.',
      },
      '410': {
        description:
          'Gone: the endpoint is disabled at once (disabledReason gone), unless a client changed its URL while the attempt was in flight.',
      },
    },
  }
}

function header(name: string, schema: Json, description: string): Json {
  return { name, in: 'header', required: true, schema, description }
}
