import { EVENT_ID, EVENT_TYPES, type EventType } from '../domain/event.js'
import type { WebhookEndpoint } from '../domain/webhook.js'
import { FieldErrors } from '../users/field-errors.js'
import {
  addIfIllFormed,
  countCodePoints,
  hasLoneSurrogate,
  hasVisible,
  ILL_FORMED,
  toPointer,
} from '../users/text-rules.js'
import { checkWebhookUrl, type RefusedHost } from './check-webhook-url.js'
import {
  DEFAULT_OVERLAP_SECONDS,
  isWebhookFieldName,
  MAX_DESCRIPTION_LENGTH,
  MAX_EVENT_TYPES,
  MAX_OVERLAP_SECONDS,
  WEBHOOK_FIELDS,
} from './webhook-fields.js'

/** What a client sets of an endpoint, checked: what a create or a patch makes of it. */
export interface WebhookInput {
  readonly url: string
  readonly eventTypes: readonly EventType[] | null
  readonly description: string
  readonly enabled: boolean
}

type Body = Readonly<Record<string, unknown>>
type Draft = { -readonly [K in keyof WebhookInput]: WebhookInput[K] | undefined }

/** POST /webhooks: url required, the rest defaulted; output-only fields and `secret` refused. */
export function validateWebhookCreate(body: unknown, refusedHost: RefusedHost): WebhookInput {
  return validateBody(body, undefined, refusedHost)
}

/**
 * PATCH (RFC 7396): the fields named change, the others keep their values; an output-only field
 * passes when it equals the stored value.
 */
export function validateWebhookPatch(
  body: unknown,
  current: WebhookEndpoint,
  refusedHost: RefusedHost,
): WebhookInput {
  return validateBody(body, current, refusedHost)
}

/** `secret` in any body is read-only: the service makes every secret, and shows it once. */
const SECRET_READ_ONLY =
  'secret is read-only: the service makes it; POST /webhooks/{id}:rotateSecret makes a new one.'

/** The body of `:rotateSecret`: nothing, `{}` or `{"overlapSeconds": n}`; returns n. */
export function validateRotation(body: unknown): number {
  if (body === undefined) return DEFAULT_OVERLAP_SECONDS
  const errors = new FieldErrors()
  let overlap = DEFAULT_OVERLAP_SECONDS
  for (const [key, value] of Object.entries(requireObject(body, errors))) {
    const pointer = toPointer(key)
    if (addIfIllFormed(pointer, errors, key, value)) continue
    if (key === 'secret') {
      errors.add(pointer, 'read_only', SECRET_READ_ONLY)
    } else if (key !== 'overlapSeconds') {
      errors.add(pointer, 'unknown_field', 'Only overlapSeconds is taken here (or no body).')
    } else if (typeof value !== 'number' || !Number.isInteger(value)) {
      errors.add(pointer, 'invalid_type', 'overlapSeconds must be a whole number of seconds.')
    } else if (value < 0 || value > MAX_OVERLAP_SECONDS) {
      const message = `overlapSeconds must be from 0 to ${MAX_OVERLAP_SECONDS}.`
      errors.add(pointer, 'out_of_range', message)
    } else overlap = value
  }
  errors.throwIfAny()
  return overlap
}

/** The body of `PUT /webhooks/{id}/cursor`: `{"after": "<event id>"}`; returns the id. */
export function validateCursorBody(body: unknown): string {
  const errors = new FieldErrors()
  const fields = requireObject(body, errors)
  let after: string | undefined
  for (const [key, value] of Object.entries(fields)) {
    const pointer = toPointer(key)
    if (addIfIllFormed(pointer, errors, key, value)) continue
    if (key === 'secret') {
      errors.add(pointer, 'read_only', SECRET_READ_ONLY)
    } else if (key !== 'after') {
      errors.add(pointer, 'unknown_field', 'Only after is taken here.')
    } else if (typeof value !== 'string') {
      errors.add(pointer, value === null ? 'required' : 'invalid_type', 'after must be a string.')
    } else if (!EVENT_ID.test(value) || value > MAX_EVENT_ID) {
      const message = `after must be an event id of the feed (16 lower-case hex digits, at most ${MAX_EVENT_ID}).`
      errors.add(pointer, 'invalid_format', message)
    } else after = value
  }
  if (!Object.hasOwn(fields, 'after')) errors.add('/after', 'required', 'after is required.')
  errors.throwIfAny()
  if (after === undefined) throw new Error('validateCursorBody: after was refused without an error')
  return after
}

/** The largest event id every store holds exactly (PostgreSQL's largest bigint). */
const MAX_EVENT_ID = '7fffffffffffffff'

function validateBody(
  body: unknown,
  current: WebhookEndpoint | undefined,
  refusedHost: RefusedHost,
): WebhookInput {
  const errors = new FieldErrors()
  const fields = requireObject(body, errors)
  const draft: Draft =
    current === undefined
      ? { url: undefined, eventTypes: null, description: '', enabled: true }
      : { ...current }
  for (const [key, value] of Object.entries(fields)) {
    if (!checkKnown(key, value, current, errors)) continue
    if (key === 'url') draft.url = checkWebhookUrl(value, refusedHost, errors)
    else if (key === 'eventTypes') draft.eventTypes = checkEventTypes(value, errors)
    else if (key === 'description') draft.description = checkDescription(value, errors)
    else if (key === 'enabled') draft.enabled = checkEnabled(value, errors)
  }
  if (current === undefined && !Object.hasOwn(fields, 'url'))
    errors.add('/url', 'required', 'url is required.')
  errors.throwIfAny()
  const { url, eventTypes, description, enabled } = draft
  if (url === undefined || eventTypes === undefined || description === undefined) {
    throw new Error('validateWebhook: a field was refused without an error')
  }
  if (enabled === undefined) throw new Error('validateWebhook: enabled refused without an error')
  return { url, eventTypes, description, enabled }
}

function requireObject(body: unknown, errors: FieldErrors): Body {
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) return body as Body
  errors.add('', 'invalid_type', 'The body must be a JSON object.')
  errors.throwIfAny()
  return {}
}

/**
 * True for a writable field (the caller checks its value). `secret` and output-only fields are
 * read_only (an output-only one passes in a patch when it equals the stored value); anything
 * else is unknown.
 */
function checkKnown(
  key: string,
  value: unknown,
  current: WebhookEndpoint | undefined,
  errors: FieldErrors,
): boolean {
  const pointer = toPointer(key)
  if (key === 'secret') {
    if (!addIfIllFormed(pointer, errors, value)) errors.add(pointer, 'read_only', SECRET_READ_ONLY)
    return false
  }
  if (!isWebhookFieldName(key)) {
    if (!addIfIllFormed(pointer, errors, key, value))
      errors.add(pointer, 'unknown_field', 'This is not a field of a webhook endpoint.')
    return false
  }
  if (WEBHOOK_FIELDS[key].access === 'writable') return true
  if (addIfIllFormed(pointer, errors, value)) return false
  if (current !== undefined && current[key] === value) return false
  const message =
    current === undefined
      ? `${key} is read-only: it is set by the server.`
      : `${key} is read-only: send its stored value or leave it out.`
  errors.add(pointer, 'read_only', message)
  return false
}

function checkEventTypes(value: unknown, errors: FieldErrors): EventType[] | null | undefined {
  if (value === null) return null
  if (!Array.isArray(value)) {
    errors.add('/eventTypes', 'invalid_type', 'eventTypes must be null or an array of types.')
    return undefined
  }
  if (value.length === 0 || value.length > MAX_EVENT_TYPES) {
    const code = value.length === 0 ? 'too_short' : 'too_long'
    const message = `eventTypes must name 1 to ${MAX_EVENT_TYPES} event types, or be null for all.`
    errors.add('/eventTypes', code, message)
    return undefined
  }
  const types: EventType[] = []
  let refused = false
  value.forEach((item: unknown, index) => {
    const pointer = `/eventTypes/${index}`
    const type = EVENT_TYPES.find((candidate) => candidate === item)
    if (typeof item !== 'string') {
      errors.add(pointer, 'invalid_type', 'An event type must be a string.')
    } else if (hasLoneSurrogate(item)) {
      errors.add(pointer, ILL_FORMED.code, ILL_FORMED.message)
    } else if (type === undefined) {
      errors.add(pointer, 'invalid_value', `An event type is one of ${EVENT_TYPES.join(', ')}.`)
    } else if (types.includes(type)) {
      errors.add(pointer, 'duplicate_value', 'Each event type may be named once.')
    } else {
      types.push(type)
      return
    }
    refused = true
  })
  return refused ? undefined : types
}

const CONTROLS = /[\u0000-\u001F\u007F-\u009F]/

/** The text rules of a user's name, except that it may be empty ("" by default). */
function checkDescription(value: unknown, errors: FieldErrors): string | undefined {
  const refuse = (code: string, message: string): undefined => {
    errors.add('/description', code, message)
    return undefined
  }
  if (typeof value !== 'string') return refuse('invalid_type', 'description must be a string.')
  if (hasLoneSurrogate(value)) return refuse(ILL_FORMED.code, ILL_FORMED.message)
  const text = value.trim()
  if (countCodePoints(text) > MAX_DESCRIPTION_LENGTH) {
    const message = `description must have at most ${MAX_DESCRIPTION_LENGTH} characters.`
    return refuse('too_long', message)
  }
  if (CONTROLS.test(text)) {
    const message = 'description must not contain control characters (C0, DEL or C1).'
    return refuse('invalid_characters', message)
  }
  if (text !== '' && !hasVisible(text)) {
    const message = 'description has nothing visible: only zero-width characters.'
    return refuse('invalid_characters', message)
  }
  return text
}

function checkEnabled(value: unknown, errors: FieldErrors): boolean | undefined {
  if (typeof value === 'boolean') return value
  errors.add('/enabled', 'invalid_type', 'enabled must be true or false.')
  return undefined
}
