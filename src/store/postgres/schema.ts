import { MAX_VERSION } from '../../domain/user.js'
import type { Logger } from '../../log/logger.js'
import { EVENT_COUNTER_MIGRATION, EVENT_ID_MIGRATION, EVENT_MIGRATION } from './event-schema.js'
import { KEPT_KEYS_MIGRATION } from './kept-key-schema.js'
import type { PoolClient } from './pg-types.js'
import { WEBHOOKS_MIGRATION } from './webhook-schema.js'

/**
 * The schema, one migration per version, applied in order at start. A migration is never edited
 * once released: a change is a new entry. The version applied is recorded in `user_service_schema`.
 */
export const MIGRATIONS: readonly (readonly string[])[] = [
  [
    // Ids and keys compare byte by byte (COLLATE "C"), as JavaScript compares strings: keyset
    // paging and uniqueness do not depend on the database's locale. The email key is the
    // lower-cased email computed by the service (PostgreSQL's lower() follows the locale).
    // Metadata is json, not jsonb: json keeps the text as given, so its keys keep their order.
    // Time stamps are the service's own ISO strings, exact to the millisecond.
    `CREATE TABLE users (
      id text COLLATE "C" PRIMARY KEY,
      email text NOT NULL,
      email_key text COLLATE "C" NOT NULL,
      name text NOT NULL,
      name_key text COLLATE "C" NOT NULL,
      status text COLLATE "C" NOT NULL CHECK (status IN ('pending', 'active', 'suspended')),
      metadata json NOT NULL,
      created_at text NOT NULL,
      updated_at text NOT NULL,
      version integer NOT NULL CHECK (version >= 1)
    )`,
    'CREATE UNIQUE INDEX users_email_key ON users (email_key)',
    'CREATE INDEX users_status_id ON users (status, id)',
    // A deleted id and when, nothing personal: its tokens stay refused forever (docs/api.md).
    'CREATE TABLE tombstones (id text COLLATE "C" PRIMARY KEY, deleted_at text NOT NULL)',
  ],
  // The change feed (docs/events.md), appended in the transaction of each change.
  EVENT_MIGRATION,
  // Versions run to MAX_VERSION (2^53 - 1) on every store (docs/api.md); integer stopped at
  // 2^31 - 1, and the deletion event of a user at the top carries one more. The rewrite locks both
  // tables for as long as it takes; replicas still running the previous release fail their
  // prepared reads of these columns until they are replaced (roll them forward).
  [
    'ALTER TABLE users ALTER COLUMN version TYPE bigint',
    `ALTER TABLE users ADD CONSTRAINT users_version_range CHECK (version <= ${MAX_VERSION})`,
    'ALTER TABLE events ALTER COLUMN version TYPE bigint',
  ],
  // The feed's order without a global lock (docs/postgresql.md): event ids from the writing
  // transaction's id, readers below the oldest transaction still running. Replicas of an earlier
  // release fail their writes and feed reads from here on (roll them forward).
  EVENT_ID_MIGRATION,
  // Event ids in commit order, restore-safe, never held back by a session the service does not
  // own: a counter row taken last in each transaction. Replicas of an earlier release fail their
  // writes and feed reads from here on (roll them forward).
  EVENT_COUNTER_MIGRATION,
  // A user's revocation time (docs/api.md, revoking tokens): null until its first revocation.
  // Adding a nullable column rewrites nothing; replicas of an earlier release name their columns
  // and go on, but neither show nor honour a revocation (roll them forward).
  ['ALTER TABLE users ADD COLUMN tokens_valid_after text'],
  // The kept Idempotency-Keys (docs/postgresql.md): a new table, nothing rewritten; replicas of an
  // earlier release go on, but neither keep nor honour a key (roll them forward).
  KEPT_KEYS_MIGRATION,
  // Webhook endpoints, their cursors, delivery logs and leases (docs/postgresql.md): new tables,
  // nothing rewritten; replicas of an earlier release go on and neither show nor deliver them.
  WEBHOOKS_MIGRATION,
]

export const SCHEMA_VERSION = MIGRATIONS.length

/** One key for every replica of the service on a database: migrations run one at a time. */
const MIGRATION_LOCK = 7_355_608_114

/** The database was migrated by a newer release: this code does not know its schema. */
export class SchemaTooNewError extends Error {
  override name = 'SchemaTooNewError'
}

/** The database cannot store every Unicode character (its encoding is not UTF8). */
export class DatabaseEncodingError extends Error {
  override name = 'DatabaseEncodingError'
}

/**
 * Brings the schema to SCHEMA_VERSION under an advisory lock, so that replicas starting together
 * migrate once; refuses a database whose schema is newer than this code. Then tries, outside the
 * versioned schema, the pg_trgm indexes that let `q` avoid reading every row: an extension the
 * role may not create is not fatal (a `q` page is bounded by the scan budget anyway).
 */
export async function migrate(
  client: PoolClient,
  logger: Logger,
  schema: string | undefined,
): Promise<number> {
  // A migration may rewrite a table, and waits for the replicas migrating before it: the
  // sessions' statement time-out is lifted for it, and set back when it is done.
  await requireUnicodeDatabase(client)
  await client.query('SET statement_timeout = 0')
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK])
  try {
    if (schema !== undefined) {
      // Created only when missing: PostgreSQL checks the right to create before IF NOT EXISTS,
      // and a role that may only read and write the tables must still start once they exist.
      const made = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])
      if (made.rows.length === 0)
        await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdentifier(schema)}`)
      // A session that resolved its search_path before another one made the schema may keep that
      // resolution (seen once in many runs: several stores opening one fresh schema together).
      // Assigning the search_path again makes PostgreSQL resolve it anew, now that it exists.
      await client.query("SELECT set_config('search_path', current_setting('search_path'), false)")
      await requireCurrentSchema(client, schema)
    }
    if (!(await relationExists(client, 'user_service_schema'))) {
      await client.query(`CREATE TABLE IF NOT EXISTS user_service_schema (
        version integer PRIMARY KEY,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`)
    }
    const found = await client.query<{ version: number | null }>(
      'SELECT max(version) AS version FROM user_service_schema',
    )
    const current = found.rows[0]?.version ?? 0
    if (current > SCHEMA_VERSION) {
      throw new SchemaTooNewError(
        `the database schema is at version ${current}, newer than this service knows (${SCHEMA_VERSION}): run a release of the service that knows it`,
      )
    }
    for (let version = current + 1; version <= SCHEMA_VERSION; version += 1) {
      await client.query('BEGIN')
      try {
        for (const statement of MIGRATIONS[version - 1] ?? []) await client.query(statement)
        await client.query('INSERT INTO user_service_schema (version) VALUES ($1)', [version])
        await client.query('COMMIT')
      } catch (error) {
        await client.query('ROLLBACK')
        throw error
      }
      logger.info('database schema migrated', { version })
    }
    await createTrigramIndexes(client, logger)
    return SCHEMA_VERSION
  } finally {
    try {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK])
    } finally {
      await client.query('RESET statement_timeout')
    }
  }
}

/**
 * Every store takes any Unicode text (an emoji, `İ`, `ẞ`). A database in an encoding that holds
 * only some characters (LATIN1, WIN1252, EUC_JP…) refuses the others with a 400 on PostgreSQL
 * alone, user by user: refuse to start instead. SQL_ASCII keeps the driver's UTF-8 bytes as given.
 */
async function requireUnicodeDatabase(client: PoolClient): Promise<void> {
  const found = await client.query<{ server_encoding: string }>('SHOW server_encoding')
  const encoding = found.rows[0]?.server_encoding ?? 'unknown'
  if (encoding === 'UTF8' || encoding === 'SQL_ASCII') return
  throw new DatabaseEncodingError(
    `the database's encoding is ${encoding}, which cannot hold every character a user may have: use a UTF8 database (CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0)`,
  )
}

/**
 * Unqualified names resolve through the search_path `<schema>,public`, which skips a schema the
 * role may not use: tables would then be made and written in `public` without an error. Refuse
 * to start before anything is made.
 */
async function requireCurrentSchema(client: PoolClient, schema: string): Promise<void> {
  const found = await client.query<{ schema: string | null }>('SELECT current_schema() AS schema')
  const current = found.rows[0]?.schema ?? null
  if (current !== schema) {
    throw new Error(
      `the search_path resolves to schema ${String(current)}, not to the configured schema ${schema}`,
    )
  }
}

/** Whether the search path names a table or index of this name (to_regclass: no error). */
async function relationExists(client: PoolClient, name: string): Promise<boolean> {
  const sql = 'SELECT to_regclass($1) IS NOT NULL AS found'
  const found = await client.query<{ found: boolean }>(sql, [name])
  return found.rows[0]?.found === true
}

async function createTrigramIndexes(client: PoolClient, logger: Logger): Promise<void> {
  const made = await Promise.all(
    ['users_email_trgm', 'users_name_trgm'].map((name) => relationExists(client, name)),
  )
  if (made.every(Boolean)) return
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_trgm')
    await client.query(
      'CREATE INDEX IF NOT EXISTS users_email_trgm ON users USING gin (email_key gin_trgm_ops)',
    )
    await client.query(
      'CREATE INDEX IF NOT EXISTS users_name_trgm ON users USING gin (name_key gin_trgm_ops)',
    )
  } catch (error) {
    logger.warn('no pg_trgm indexes: q filters read rows within the scan budget', {
      error: String(error),
    })
  }
}

export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}
