import type { PoolClient } from './pg-types.js'

/**
 * Every column the statements of this release name, by table, once the schema is at
 * SCHEMA_VERSION. A new migration that adds a table or a column adds it here too (a test compares
 * this with a freshly migrated schema). Columns added by someone else are no concern.
 */
export const SCHEMA_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  users: [
    'id',
    'email',
    'email_key',
    'name',
    'name_key',
    'status',
    'metadata',
    'created_at',
    'updated_at',
    'version',
    'tokens_valid_after',
  ],
  tombstones: ['id', 'deleted_at'],
  events: [
    'id',
    'type',
    'time',
    'user_id',
    'version',
    'actor',
    'request_id',
    'changed',
    'user_json',
  ],
  event_counter: ['one', 'pruned_through', 'last_id'],
  idempotency_keys: [
    'subject',
    'key',
    'fingerprint',
    'status',
    'content_type',
    'location',
    'etag',
    'body',
    'answered_at',
    'expires_at',
    'holder',
    'held_until',
  ],
  webhooks: [
    'id',
    'url',
    'event_types',
    'description',
    'enabled',
    'disabled_reason',
    'disabled_at',
    'previous_secret_expires_at',
    'created_at',
    'updated_at',
    'version',
    'secret',
    'previous_secret',
    'revision',
  ],
  webhook_cursors: ['webhook_id', 'after'],
  webhook_attempts: [
    'webhook_id',
    'id',
    'event_id',
    'event_type',
    'attempt',
    'time',
    'duration_ms',
    'result',
    'response_status',
    'error',
    'response',
  ],
  webhook_leases: ['webhook_id', 'holder', 'expires_at'],
  user_service_schema: ['version', 'applied_at'],
}

/** The recorded schema version is current, but a table or column it promises is gone. */
export class SchemaDamagedError extends Error {
  override name = 'SchemaDamagedError'
}

/**
 * Refuses a schema whose recorded version is current but which lacks a table or a column this
 * release uses (changed by hand, or restored in part). Without this check the start succeeded,
 * /readyz said ready, and every request that named the missing column was a 503 logged as "the
 * database does not answer" (SQLSTATE 42703), which sent operators looking at the network.
 * pg_attribute, unlike information_schema, lists columns whatever the role's privileges.
 */
export async function requireSchemaColumns(client: PoolClient): Promise<void> {
  // Each table as the statements find it: by its unqualified name, through the search_path.
  const found = await client.query<{ table: string; column: string }>(
    `SELECT t.name AS "table", a.attname AS "column"
       FROM unnest($1::text[]) AS t(name) JOIN pg_attribute a ON a.attrelid = to_regclass(t.name)
      WHERE a.attnum > 0 AND NOT a.attisdropped`,
    [Object.keys(SCHEMA_COLUMNS)],
  )
  const present = new Set(found.rows.map((row) => `${row.table}.${row.column}`))
  const missing = Object.entries(SCHEMA_COLUMNS).flatMap(([table, columns]) =>
    columns.map((column) => `${table}.${column}`).filter((name) => !present.has(name)),
  )
  if (missing.length === 0) return
  const shown = missing.slice(0, 5).join(', ') + (missing.length > 5 ? ', …' : '')
  throw new SchemaDamagedError(
    `the database schema is recorded as current but lacks ${missing.length === 1 ? 'column' : 'columns'} ${shown}: it was changed by hand or restored in part; restore it from a backup`,
  )
}
