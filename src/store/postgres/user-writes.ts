import type { UserRecord } from '../../domain/user.js'
import { contention } from './classify-error.js'
import type { PoolClient, QueryResult } from './pg-types.js'
import { rowValues, STORED_COLUMNS } from './rows.js'

/**
 * The statements of PostgresStore's writes, run inside its transactions. Each one is guarded (no
 * tombstone, the version read): a row count of 0 means another writer got there first.
 */
export function insertUnlessBuried(client: PoolClient, record: UserRecord): Promise<QueryResult> {
  return client.query({
    name: 'users_insert',
    text: `INSERT INTO users (${STORED_COLUMNS})
        SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11
        WHERE NOT EXISTS (SELECT 1 FROM tombstones WHERE id = $1)`,
    values: rowValues(record),
  })
}

export function updateAtVersion(
  client: PoolClient,
  record: UserRecord,
  version: number,
): Promise<QueryResult> {
  return client.query({
    name: 'users_update',
    text: `UPDATE users SET email = $2, email_key = $3, name = $4, name_key = $5, status = $6, metadata = $7,
            created_at = $8, updated_at = $9, version = $10, tokens_valid_after = $11
            WHERE id = $1 AND version = $12`,
    values: [...rowValues(record), version],
  })
}

/** Deletes the row at `version` and leaves its tombstone; false when the row had changed. */
export async function buryAtVersion(
  client: PoolClient,
  id: string,
  version: number,
  deletedAt: string,
): Promise<boolean> {
  const removed = await client.query({
    name: 'users_delete',
    text: 'DELETE FROM users WHERE id = $1 AND version = $2',
    values: [id, version],
  })
  if (removed.rowCount !== 1) return false
  await client.query({
    name: 'tombstones_insert',
    text: 'INSERT INTO tombstones (id, deleted_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING',
    values: [id, deletedAt],
  })
  return true
}

/** A change lost to another replica is re-read and tried again, this many times at most. */
const MAX_ATTEMPTS = 100

/**
 * Runs a compare-and-set change until it wins: `attempt` reads the user, writes at the version it
 * read, and gives `{ won }`, or undefined when another replica changed or deleted the user since
 * (its version moved): then it runs again, MAX_ATTEMPTS times at most before `contention`.
 */
export async function untilWon<T>(
  id: string,
  attempt: () => Promise<{ readonly won: T } | undefined>,
): Promise<T> {
  for (let tries = 1; ; tries += 1) {
    const outcome = await attempt()
    if (outcome !== undefined) return outcome.won
    if (tries >= MAX_ATTEMPTS) throw contention(id)
  }
}
