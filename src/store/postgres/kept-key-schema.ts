import type { KeptAnswer, KeptKey } from '../../domain/kept-key.js'
import type { QueryResultRow } from './pg-types.js'

/**
 * The kept Idempotency-Keys (migration 7), one row per subject and key. A row with an answer
 * (`status` set) is a kept key, until `expires_at`; a row without one is a hold of a request in
 * flight, by `holder` (a store instance), until `held_until` unless its holder renews it. The
 * partial indexes serve the sweep of expired keys and of stale holds. Never edited.
 */
export const KEPT_KEYS_MIGRATION: readonly string[] = [
  `CREATE TABLE idempotency_keys (
    subject text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    fingerprint text,
    status smallint,
    content_type text,
    location text,
    etag text,
    body text,
    answered_at timestamptz,
    expires_at timestamptz,
    holder text,
    held_until timestamptz,
    PRIMARY KEY (subject, key),
    CHECK ((status IS NULL) = (expires_at IS NULL) AND (status IS NULL) = (fingerprint IS NULL)),
    CHECK (status IS NOT NULL OR (holder IS NOT NULL AND held_until IS NOT NULL))
  )`,
  'CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at) WHERE status IS NOT NULL',
  'CREATE INDEX idempotency_keys_holds ON idempotency_keys (held_until) WHERE status IS NULL',
]

/** The columns of a kept key's answer, in the order of keptValues (after subject and key). */
export const KEPT_COLUMNS =
  'subject, key, fingerprint, status, content_type, location, etag, body, expires_at'

/**
 * What an upsert of a kept key sets on the row it finds: the answer, and no hold. Its WHERE (the
 * row is a hold, or a key expired by the database's clock) is the caller's: a kept key is never
 * overwritten.
 */
export const SET_ANSWER = `fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status,
  content_type = EXCLUDED.content_type, location = EXCLUDED.location, etag = EXCLUDED.etag,
  body = EXCLUDED.body, answered_at = now(), expires_at = EXCLUDED.expires_at, holder = NULL,
  held_until = NULL`

/** A kept key as the database gives it back. */
export interface KeptRow extends QueryResultRow {
  subject: string
  key: string
  fingerprint: string
  status: number
  content_type: string | null
  location: string | null
  etag: string | null
  body: string | null
  expires_at: Date
}

/** The values of KEPT_COLUMNS. Of the answer's headers only `location` is kept (all it has). */
export function keptValues(kept: KeptKey): unknown[] {
  const { answer } = kept
  return [
    kept.subject,
    kept.key,
    kept.fingerprint,
    answer.status,
    answer.contentType ?? null,
    answer.headers?.['location'] ?? null,
    answer.etag ?? null,
    answer.body ?? null,
    new Date(kept.expiresAt),
  ]
}

/** The kept key of a row: absent columns stay absent. */
export function toKeptKey(row: KeptRow): KeptKey {
  const answer: KeptAnswer = {
    status: row.status,
    ...(row.body === null ? {} : { body: row.body }),
    ...(row.content_type === null ? {} : { contentType: row.content_type }),
    ...(row.etag === null ? {} : { etag: row.etag }),
    ...(row.location === null ? {} : { headers: { location: row.location } }),
  }
  return {
    subject: row.subject,
    key: row.key,
    fingerprint: row.fingerprint,
    answer,
    expiresAt: row.expires_at.getTime(),
  }
}
