import { ServiceError } from '../domain/errors.js'
import { EVENT_ID } from '../domain/event.js'
import { isCanonicalUuid } from '../domain/uuid7.js'
import type { StoredWebhook } from '../domain/webhook.js'

/**
 * The errors every WebhookStore answers alike, and what each refuses before it writes: ids name
 * files in the file store, and PostgreSQL's text cannot hold a NUL.
 */

export function webhookNotFound(): ServiceError {
  return new ServiceError('not_found', 'There is no webhook endpoint with this id.')
}

/** One more endpoint than `max` (WEBHOOKS_MAX), across every replica. */
export function webhookLimitReached(max: number): ServiceError {
  return new ServiceError(
    'webhook_limit_reached',
    `At most ${max} webhook endpoints may be registered: delete one before adding another.`,
  )
}

export function duplicateWebhookId(id: string): ServiceError {
  return new ServiceError('duplicate_id', `A webhook endpoint with the id ${id} already exists.`)
}

function invalid(pointer: string, code: string, message: string): ServiceError {
  return new ServiceError('validation_failed', message, {
    errors: [{ pointer, code, message }],
  })
}

/** An endpoint about to be stored under `id` (its own id for a create). */
export function checkStorableWebhook(hook: StoredWebhook, id: string): void {
  const { endpoint } = hook
  if (endpoint.id !== id) throw invalid('/id', 'read_only', 'A webhook endpoint keeps its id.')
  if (!isCanonicalUuid(id)) throw invalid('/id', 'invalid_format', 'id must be a lower-case UUID.')
  if (!Number.isSafeInteger(endpoint.version) || endpoint.version < 1)
    throw invalid('/version', 'out_of_range', 'version must be a whole number from 1.')
  const texts: [string, string | null][] = [
    ['/url', endpoint.url],
    ['/description', endpoint.description],
    ['/secret', hook.secret],
    ['/secret', hook.previousSecret],
  ]
  for (const [pointer, text] of texts) {
    if (text?.includes('\u0000') === true)
      throw invalid(pointer, 'invalid_characters', 'Text must not contain a NUL (U+0000).')
  }
}

/** An event id a cursor is set to: 16 lower-case hex digits. */
export function checkStorableCursor(after: string): void {
  if (!EVENT_ID.test(after))
    throw invalid('/after', 'invalid_format', 'after must be an event id (16 hex digits).')
}

/** Endpoints oldest first: by creation time, then by id (UUIDv7s of one ms). */
export function byAge(a: StoredWebhook, b: StoredWebhook): number {
  const x = a.endpoint
  const y = b.endpoint
  if (x.createdAt !== y.createdAt) return x.createdAt < y.createdAt ? -1 : 1
  return x.id < y.id ? -1 : x.id > y.id ? 1 : 0
}
