import { EVENT_ID, EVENT_TYPES, type EventType } from '../../domain/event.js'
import { isCanonicalUuid } from '../../domain/uuid7.js'
import {
  attemptJson,
  DELIVERY_ERRORS,
  type DeliveryAttempt,
  type DeliveryError,
  DISABLED_REASONS,
  type DisabledReason,
  type StoredWebhook,
  type WebhookEndpoint,
} from '../../domain/webhook.js'

/**
 * The text of the webhook files (docs/operations.md): an endpoint with its secrets, one JSON
 * object per file, and its delivery log, one JSON line per attempt. The readers take only what
 * the store wrote: anything else (a torn line, a hand-edited file) is undefined.
 */

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const SECRET = /^whsec_[A-Za-z0-9+/]+={0,2}$/

/** An endpoint file's text: the endpoint's fields in the API's order, then its secrets. */
export function toWebhookJson(hook: StoredWebhook): string {
  const e = hook.endpoint
  return JSON.stringify({
    endpoint: {
      id: e.id,
      url: e.url,
      eventTypes: e.eventTypes,
      description: e.description,
      enabled: e.enabled,
      disabledReason: e.disabledReason,
      disabledAt: e.disabledAt,
      previousSecretExpiresAt: e.previousSecretExpiresAt,
      createdAt: e.createdAt,
      updatedAt: e.updatedAt,
      version: e.version,
    },
    secret: hook.secret,
    previousSecret: hook.previousSecret,
  })
}

/** Reads an endpoint file named after `expectedId`; undefined for anything the store did not write. */
export function parseStoredWebhook(text: string, expectedId: string): StoredWebhook | undefined {
  const value = parseObject(text)
  const endpoint = value === undefined ? undefined : toEndpoint(value['endpoint'], expectedId)
  if (value === undefined || endpoint === undefined) return undefined
  const { secret, previousSecret } = value
  if (typeof secret !== 'string' || !SECRET.test(secret)) return undefined
  if (
    previousSecret !== null &&
    (typeof previousSecret !== 'string' || !SECRET.test(previousSecret))
  )
    return undefined
  return { endpoint, secret, previousSecret }
}

function toEndpoint(value: unknown, id: string): WebhookEndpoint | undefined {
  if (!isRecord(value) || value['id'] !== id || !isCanonicalUuid(id)) return undefined
  const { url, eventTypes, description, enabled, disabledReason, version } = value
  if (typeof url !== 'string' || typeof description !== 'string') return undefined
  if (typeof enabled !== 'boolean') return undefined
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1) return undefined
  const types = toEventTypes(eventTypes)
  if (types === undefined) return undefined
  const reason: DisabledReason | null | undefined =
    disabledReason === null
      ? null
      : isOneOf(DISABLED_REASONS, disabledReason)
        ? disabledReason
        : undefined
  if (reason === undefined) return undefined
  const createdAt = toTime(value['createdAt'], false)
  const updatedAt = toTime(value['updatedAt'], false)
  const disabledAt = toTime(value['disabledAt'], true)
  const expires = toTime(value['previousSecretExpiresAt'], true)
  if (createdAt === undefined || updatedAt === undefined) return undefined
  if (disabledAt === undefined || expires === undefined) return undefined
  return {
    id,
    url,
    eventTypes: types,
    description,
    enabled,
    disabledReason: reason,
    disabledAt,
    previousSecretExpiresAt: expires,
    createdAt,
    updatedAt,
    version,
  }
}

function toEventTypes(value: unknown): readonly EventType[] | null | undefined {
  if (value === null) return null
  if (!Array.isArray(value)) return undefined
  const types: EventType[] = []
  for (const item of value as unknown[]) {
    if (!isOneOf(EVENT_TYPES, item)) return undefined
    types.push(item)
  }
  return types
}

/** A delivery log's line, without its newline: the attempt as the API shows it. */
export const toAttemptLine = attemptJson

/** Reads a delivery log's line; undefined for a torn or foreign one. */
export function parseAttemptLine(line: string): DeliveryAttempt | undefined {
  const v = parseObject(line)
  if (v === undefined) return undefined
  const { id, webhookId, eventId, eventType, attempt, durationMs, result, responseStatus } = v
  const { error, response } = v
  if (typeof id !== 'string' || !isCanonicalUuid(id)) return undefined
  if (typeof eventId !== 'string' || !EVENT_ID.test(eventId)) return undefined
  if (webhookId !== `msg_${eventId}` || !isOneOf(EVENT_TYPES, eventType)) return undefined
  if (!isCount(attempt) || attempt < 1 || !isCount(durationMs)) return undefined
  if (result !== 'succeeded' && result !== 'failed') return undefined
  if (responseStatus !== null && !isCount(responseStatus)) return undefined
  const failure: DeliveryError | null | undefined =
    error === null ? null : isOneOf(DELIVERY_ERRORS, error) ? error : undefined
  if (failure === undefined || typeof response !== 'string') return undefined
  const time = toTime(v['time'], false)
  if (time === undefined) return undefined
  return {
    id,
    webhookId,
    eventId,
    eventType,
    attempt,
    time,
    durationMs,
    result,
    responseStatus,
    error: failure,
    response,
  }
}

/** A time stamp as the service writes them; `nullable` lets null through as null. */
function toTime(value: unknown, nullable: boolean): string | null | undefined
function toTime(value: unknown, nullable: false): string | undefined
function toTime(value: unknown, nullable: boolean): string | null | undefined {
  if (value === null && nullable) return null
  return typeof value === 'string' && TIMESTAMP.test(value) ? value : undefined
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

function isOneOf<T extends string>(list: readonly T[], value: unknown): value is T {
  return typeof value === 'string' && (list as readonly string[]).includes(value)
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text)
    return isRecord(value) ? value : undefined
  } catch {
    return undefined
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
