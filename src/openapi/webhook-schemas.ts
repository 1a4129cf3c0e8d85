import { EVENT_TYPES } from '../domain/event.js'
import { DELIVERY_ERRORS, DISABLED_REASONS } from '../domain/webhook.js'
import { EVENT_CURSOR } from '../routes/events/list-events.js'
import { USER_ID } from '../routes/parameter-schemas.js'
import { type Json, ref } from '../routes/route.js'
import { INVISIBLE_BMP_CLASS, TRIMMED_CLASS } from '../users/text-rules.js'
import {
  MAX_DESCRIPTION_LENGTH,
  MAX_EVENT_TYPES,
  MAX_OVERLAP_SECONDS,
  MAX_URL_LENGTH,
  WEBHOOK_FIELD_NAMES,
  WEBHOOK_FIELDS,
  type WebhookFieldName,
} from '../webhooks/webhook-fields.js'

const TIME = { type: 'string', format: 'date-time' } as const
const NULLABLE_TIME = { type: ['string', 'null'], format: 'date-time' } as const

/*
 * The URL as the service takes it, in what a pattern can say: an http or https scheme (any case),
 * no white space, control character or `#` anywhere. The WHATWG parser needs no `//` after a
 * special scheme and reads `\` as `/` (`https:host/x`, `https:\\host\x`), and the service keeps
 * the URL as sent, so the pattern asks for neither: its answers show such a URL too. The address
 * rule (private_address) and what the parser refuses besides are said in the description only.
 */
const URL_PATTERN = `^[Hh][Tt][Tt][Pp][Ss]?:[^#${TRIMMED_CLASS}\\u0000-\\u001F\\u007F-\\u00A0\\u1680\\u2000-\\u200F\\u2028-\\u202F\\u205F\\u3000\\uFEFF\\uD800-\\uDFFF]+$`

/** The schema of each endpoint field; the description and example come from WEBHOOK_FIELDS. */
const FIELD_SCHEMAS: Record<WebhookFieldName, Json> = {
  id: { ...USER_ID },
  url: { type: 'string', minLength: 1, maxLength: MAX_URL_LENGTH, pattern: URL_PATTERN },
  eventTypes: {
    type: ['array', 'null'],
    minItems: 1,
    maxItems: MAX_EVENT_TYPES,
    uniqueItems: true,
    items: { type: 'string', enum: EVENT_TYPES },
  },
  description: { type: 'string', maxLength: MAX_DESCRIPTION_LENGTH, pattern: descriptionPattern() },
  enabled: { type: 'boolean' },
  disabledReason: { type: ['string', 'null'], enum: [...DISABLED_REASONS, null] },
  disabledAt: NULLABLE_TIME,
  previousSecretExpiresAt: NULLABLE_TIME,
  createdAt: TIME,
  updatedAt: TIME,
  version: { type: 'integer', minimum: 1 },
}

/**
 * The description rule as user-schemas.ts writes a name's: after trimming, 0 to the most code
 * points without control characters and, when not empty, a visible one.
 */
function descriptionPattern(): string {
  const controls = '\\u0000-\\u001F\\u007F-\\u009F\\uD800-\\uDFFF'
  const trimmed = `[${TRIMMED_CLASS}]`
  const visible = `(?=${trimmed}*$|[\\s\\S]*?[^${INVISIBLE_BMP_CLASS}${controls}])`
  const length = `(?=[^${controls}]{0,${MAX_DESCRIPTION_LENGTH}}${trimmed}*$)`
  return `^${visible}${trimmed}*${length}[^${controls}]*${trimmed}*$`
}

function fieldSchema(name: WebhookFieldName): Json {
  const field = WEBHOOK_FIELDS[name]
  return {
    ...FIELD_SCHEMAS[name],
    description: field.description,
    examples: [field.example],
    ...(field.access === 'output' ? { readOnly: true } : {}),
  }
}

const SECRET = {
  type: 'string',
  pattern: '^whsec_[A-Za-z0-9+/]{43}=$',
  description:
    'whsec_ and the base64 of 32 random bytes: the key of the Standard Webhooks signature. Shown only in the answers of POST /webhooks and :rotateSecret.',
  readOnly: true,
} as const

/** The webhook resource's schemas (docs/webhooks.md), merged into components.schemas. */
export function createWebhookSchemas(): Record<string, Json> {
  const properties = Object.fromEntries(
    WEBHOOK_FIELD_NAMES.map((name) => [name, fieldSchema(name)]),
  )
  const writable = Object.fromEntries(
    WEBHOOK_FIELD_NAMES.filter((name) => WEBHOOK_FIELDS[name].access === 'writable').map((name) => [
      name,
      fieldSchema(name),
    ]),
  )
  return {
    Webhook: {
      type: 'object',
      required: WEBHOOK_FIELD_NAMES,
      additionalProperties: false,
      properties,
      description: 'A webhook endpoint; never with its secret.',
    },
    WebhookWithSecret: {
      type: 'object',
      required: [...WEBHOOK_FIELD_NAMES, 'secret'],
      additionalProperties: false,
      properties: { ...properties, secret: SECRET },
      description: 'A webhook endpoint with its secret, shown this once.',
    },
    WebhookCreate: {
      type: 'object',
      required: ['url'],
      additionalProperties: false,
      properties: writable,
      description: 'Output-only fields and secret are refused (read_only).',
    },
    WebhookPatch: {
      type: 'object',
      additionalProperties: false,
      properties,
      description:
        'JSON Merge Patch (RFC 7396): the fields named change; {} changes nothing. Output-only fields may be sent only with their stored values; secret is refused (read_only).',
    },
    WebhookPage: {
      type: 'object',
      required: ['items', 'nextCursor'],
      additionalProperties: false,
      description: 'Every endpoint, oldest first.',
      properties: {
        items: { type: 'array', items: ref('Webhook') },
        nextCursor: { type: 'null', description: 'Always null: one page holds them all.' },
      },
    },
    RotateSecret: {
      type: 'object',
      additionalProperties: false,
      description: 'Send no body, {} or an overlap.',
      properties: {
        overlapSeconds: {
          type: 'integer',
          minimum: 0,
          maximum: MAX_OVERLAP_SECONDS,
          default: 86_400,
          description:
            'How long the previous secret keeps signing beside the new one; 0: not at all. A rotation during an overlap drops the oldest secret.',
        },
      },
    },
    WebhookCursor: {
      type: 'object',
      required: ['after'],
      additionalProperties: false,
      description: 'Where delivery to an endpoint stands: the last event it is done with.',
      properties: {
        after: {
          ...EVENT_CURSOR,
          description:
            'An event id; the next event delivered is the first after it. Older than the retained feed: 410 cursor_expired.',
        },
      },
    },
    DeliveryAttempt: deliveryAttempt(),
    DeliveryPage: {
      type: 'object',
      required: ['items', 'nextCursor'],
      additionalProperties: false,
      description: 'Attempts, newest first; follow nextCursor until it is null.',
      properties: {
        items: { type: 'array', items: ref('DeliveryAttempt') },
        nextCursor: {
          type: ['string', 'null'],
          description: 'Pass it as cursor for the next page; null on the last page.',
        },
      },
    },
    ...payloadSchemas(),
  }
}

function deliveryAttempt(): Json {
  return {
    type: 'object',
    required: [
      'id',
      'webhookId',
      'eventId',
      'eventType',
      'attempt',
      'time',
      'durationMs',
      'result',
      'responseStatus',
      'error',
      'response',
    ],
    additionalProperties: false,
    description: 'One attempt to deliver one event to the endpoint.',
    properties: {
      id: { ...USER_ID, description: 'The attempt, a UUIDv7.' },
      webhookId: {
        type: 'string',
        pattern: '^msg_[0-9a-f]{16}$',
        description: 'The webhook-id header sent: msg_ and the event id.',
      },
      eventId: EVENT_CURSOR,
      eventType: { type: 'string', enum: EVENT_TYPES },
      attempt: {
        type: 'integer',
        minimum: 1,
        description: 'The attempts of that event to that endpoint, from 1.',
      },
      time: TIME,
      durationMs: { type: 'integer', minimum: 0 },
      result: { type: 'string', enum: ['succeeded', 'failed'] },
      responseStatus: {
        type: ['integer', 'null'],
        description: "The answer's status, or null when none came.",
      },
      error: {
        type: ['string', 'null'],
        enum: [...DELIVERY_ERRORS, null],
        description: 'null on success.',
      },
      response: {
        type: 'string',
        description: "The first 1 KiB of the answer's body as text; empty when there was none.",
      },
    },
  }
}

/** The body of one delivery of each event type (the top-level `webhooks` of the document). */
export function payloadName(type: (typeof EVENT_TYPES)[number]): string {
  const words = type.split(/[._]/).map((word) => `${word[0]?.toUpperCase() ?? ''}${word.slice(1)}`)
  return `${words.join('')}Delivery`
}

function payloadSchemas(): Record<string, Json> {
  return Object.fromEntries(
    EVENT_TYPES.map((type) => [
      payloadName(type),
      {
        type: 'object',
        required: ['type', 'timestamp', 'data'],
        additionalProperties: false,
        description: `The body of a delivery of a ${type} event (Standard Webhooks): compact JSON, the same bytes on every attempt.`,
        properties: {
          type: { type: 'string', const: type },
          timestamp: { ...TIME, description: "The event's time." },
          data: {
            allOf: [ref('Event')],
            description: 'The event exactly as GET /events shows it.',
          },
        },
      },
    ]),
  )
}
