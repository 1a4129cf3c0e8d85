import { DISABLED_REASONS } from '../domain/webhook.js'

/** The longest `url` an endpoint takes, in characters. */
export const MAX_URL_LENGTH = 2048
/** The longest `description`, in code points after trimming. */
export const MAX_DESCRIPTION_LENGTH = 200
/** The most event types one endpoint may name (null names them all). */
export const MAX_EVENT_TYPES = 5
/** A rotation's overlap: the previous secret keeps signing this many seconds (default a day). */
export const DEFAULT_OVERLAP_SECONDS = 86_400
export const MAX_OVERLAP_SECONDS = 604_800

/**
 * The fields of an endpoint in the order the API shows them, each writable or output only, with
 * what docs and the OpenAPI schema say of it: validation and the schema read this one list.
 */
export const WEBHOOK_FIELDS = {
  id: {
    access: 'output',
    description: 'Assigned by the server at creation: a lower-case UUIDv7.',
    example: '0193b0c4-1d2e-7f00-8a1b-2c3d4e5f6a7b',
  },
  url: {
    access: 'writable',
    description:
      `Required. An absolute http: or https: URL (as the WHATWG URL parser reads it), at most ${MAX_URL_LENGTH} ` +
      'characters, without user info, fragment, white space or control characters; deliveries go to ' +
      'exactly it. A host that is a refused address (loopback, private, link-local, ...) in any ' +
      'spelling, or localhost, is 422 private_address unless WEBHOOK_ALLOW_NETWORKS allows it.',
    example: 'https://crm.example.com/hooks/users?source=user-service',
  },
  eventTypes: {
    access: 'writable',
    description: `null (the default): every event type, also types added later; else 1-${MAX_EVENT_TYPES} distinct event types.`,
    example: ['user.created', 'user.deleted'],
  },
  description: {
    access: 'writable',
    description: `Default "". Trimmed, then 0-${MAX_DESCRIPTION_LENGTH} code points without control characters (C0, DEL or C1); not only zero-width characters.`,
    example: 'CRM sync',
  },
  enabled: {
    access: 'writable',
    description:
      'Default true. false pauses deliveries (disabledReason manual); true resumes them at the cursor.',
    example: true,
  },
  disabledReason: {
    access: 'output',
    description: `null while enabled; else why it was disabled: ${DISABLED_REASONS.join(', ')}.`,
    example: null,
  },
  disabledAt: {
    access: 'output',
    description: 'When it was disabled (RFC 3339, UTC, milliseconds); null while enabled.',
    example: null,
  },
  previousSecretExpiresAt: {
    access: 'output',
    description:
      'After a rotation with an overlap: until when the previous secret signs beside the current one; null when there is none.',
    example: null,
  },
  createdAt: {
    access: 'output',
    description: 'When the endpoint was created (RFC 3339, UTC, milliseconds).',
    example: '2026-11-27T09:00:00.000Z',
  },
  updatedAt: {
    access: 'output',
    description: 'When a change last altered the endpoint.',
    example: '2026-11-27T09:00:00.000Z',
  },
  version: {
    access: 'output',
    description:
      '1 at creation, +1 on every change of a field above, by a client or by the service (a disabling), a rotation included; the ETag follows it.',
    example: 1,
  },
} as const satisfies Record<
  string,
  { access: 'writable' | 'output'; description: string; example: unknown }
>

export type WebhookFieldName = keyof typeof WEBHOOK_FIELDS

export const WEBHOOK_FIELD_NAMES = Object.keys(WEBHOOK_FIELDS) as WebhookFieldName[]

export function isWebhookFieldName(name: string): name is WebhookFieldName {
  return Object.hasOwn(WEBHOOK_FIELDS, name)
}
