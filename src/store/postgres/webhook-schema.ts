import type { EventType } from '../../domain/event.js'
import type {
  DeliveryAttempt,
  DeliveryError,
  DisabledReason,
  StoredWebhook,
} from '../../domain/webhook.js'
import type { QueryResultRow } from './pg-types.js'

/**
 * The webhooks' tables (migration 8, docs/postgresql.md), never edited. `webhooks` holds each
 * endpoint with its secrets, and a `revision` that every update moves, on which updates are
 * compared and set; `webhook_cursors` the last event each endpoint is done with, a row of its
 * own so that deliveries moving it never contend with the endpoint's changes; `webhook_attempts`
 * the delivery logs (the response as bytes: PostgreSQL's text cannot hold a NUL); and
 * `webhook_leases` which process delivers to each endpoint, until when by the database's clock.
 * What belongs to an endpoint goes with it (ON DELETE CASCADE).
 */
export const WEBHOOKS_MIGRATION: readonly string[] = [
  `CREATE TABLE webhooks (
    id text COLLATE "C" PRIMARY KEY,
    url text NOT NULL,
    event_types json,
    description text NOT NULL,
    enabled boolean NOT NULL,
    disabled_reason text COLLATE "C"
      CHECK (disabled_reason IN ('manual', 'failing', 'gone', 'cursor_expired')),
    disabled_at text,
    previous_secret_expires_at text,
    created_at text COLLATE "C" NOT NULL,
    updated_at text NOT NULL,
    version bigint NOT NULL CHECK (version >= 1),
    secret text NOT NULL,
    previous_secret text,
    revision bigint NOT NULL DEFAULT 1
  )`,
  `CREATE TABLE webhook_cursors (
    webhook_id text COLLATE "C" PRIMARY KEY REFERENCES webhooks (id) ON DELETE CASCADE,
    after text COLLATE "C" NOT NULL
  )`,
  `CREATE TABLE webhook_attempts (
    webhook_id text COLLATE "C" NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    id text COLLATE "C" NOT NULL,
    event_id text COLLATE "C" NOT NULL,
    event_type text COLLATE "C" NOT NULL,
    attempt integer NOT NULL,
    time text NOT NULL,
    duration_ms integer NOT NULL,
    result text COLLATE "C" NOT NULL CHECK (result IN ('succeeded', 'failed')),
    response_status integer,
    error text COLLATE "C",
    response bytea NOT NULL,
    PRIMARY KEY (webhook_id, id)
  )`,
  `CREATE TABLE webhook_leases (
    webhook_id text COLLATE "C" PRIMARY KEY REFERENCES webhooks (id) ON DELETE CASCADE,
    holder text COLLATE "C" NOT NULL,
    expires_at timestamptz NOT NULL
  )`,
]

/** The columns an endpoint is written to, in the order of webhookValues. */
export const WEBHOOK_COLUMNS =
  'id, url, event_types, description, enabled, disabled_reason, disabled_at, previous_secret_expires_at, created_at, updated_at, version, secret, previous_secret'

/** The columns an endpoint is read from. */
export const WEBHOOK_READ_COLUMNS =
  'id, url, event_types::text AS event_types, description, enabled, disabled_reason, disabled_at, previous_secret_expires_at, created_at, updated_at, version, secret, previous_secret, revision'

export interface WebhookRow extends QueryResultRow {
  id: string
  url: string
  event_types: string | null
  description: string
  enabled: boolean
  disabled_reason: DisabledReason | null
  disabled_at: string | null
  previous_secret_expires_at: string | null
  created_at: string
  updated_at: string
  /** bigint: the driver gives it as text. */
  version: string
  secret: string
  previous_secret: string | null
  revision: string
}

export function webhookValues(hook: StoredWebhook): unknown[] {
  const e = hook.endpoint
  return [
    e.id,
    e.url,
    e.eventTypes === null ? null : JSON.stringify(e.eventTypes),
    e.description,
    e.enabled,
    e.disabledReason,
    e.disabledAt,
    e.previousSecretExpiresAt,
    e.createdAt,
    e.updatedAt,
    e.version,
    hook.secret,
    hook.previousSecret,
  ]
}

export function toStoredWebhook(row: WebhookRow): StoredWebhook {
  return {
    endpoint: {
      id: row.id,
      url: row.url,
      eventTypes: row.event_types === null ? null : (JSON.parse(row.event_types) as EventType[]),
      description: row.description,
      enabled: row.enabled,
      disabledReason: row.disabled_reason,
      disabledAt: row.disabled_at,
      previousSecretExpiresAt: row.previous_secret_expires_at,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      version: Number(row.version),
    },
    secret: row.secret,
    previousSecret: row.previous_secret,
  }
}

/** The columns an attempt is written to (after webhook_id), in the order of attemptValues. */
export const ATTEMPT_COLUMNS =
  'id, event_id, event_type, attempt, time, duration_ms, result, response_status, error, response'

export interface AttemptRow extends QueryResultRow {
  id: string
  event_id: string
  event_type: EventType
  attempt: number
  time: string
  duration_ms: number
  result: 'succeeded' | 'failed'
  response_status: number | null
  error: DeliveryError | null
  response: Buffer
}

export function attemptValues(attempt: DeliveryAttempt): unknown[] {
  return [
    attempt.id,
    attempt.eventId,
    attempt.eventType,
    attempt.attempt,
    attempt.time,
    attempt.durationMs,
    attempt.result,
    attempt.responseStatus,
    attempt.error,
    Buffer.from(attempt.response, 'utf8'),
  ]
}

export function toAttempt(row: AttemptRow): DeliveryAttempt {
  return {
    id: row.id,
    webhookId: `msg_${row.event_id}`,
    eventId: row.event_id,
    eventType: row.event_type,
    attempt: row.attempt,
    time: row.time,
    durationMs: row.duration_ms,
    result: row.result,
    responseStatus: row.response_status,
    error: row.error,
    response: row.response.toString('utf8'),
  }
}
