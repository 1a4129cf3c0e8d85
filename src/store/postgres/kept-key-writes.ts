import type { ChangeContext } from '../../domain/change-context.js'
import { ServiceError } from '../../domain/errors.js'
import type { KeptKey } from '../../domain/kept-key.js'
import type { UserRecord } from '../../domain/user.js'
import { keyName } from '../memory-keys.js'
import { KEPT_COLUMNS, keptValues, SET_ANSWER } from './kept-key-schema.js'
import type { PoolClient } from './pg-types.js'

/**
 * The statements that keep a key inside the transaction of its change: the row is written, or
 * turned from a hold into the kept answer, and commits or rolls back with the change and its
 * event. A key another request has kept already (its hold was lost to a stalled or dead holder,
 * or it was never held) is not overwritten: the change is refused, so that one request only does
 * the work.
 */

/** Another request with this key did the work and kept its answer first. */
export function keyTaken(): ServiceError {
  return new ServiceError(
    'idempotency_key_in_use',
    'Another request with this Idempotency-Key was answered first, so nothing was changed: send it again to get that answer.',
    { retryAfterSeconds: 1 },
  )
}

/** Keeps one key in the caller's transaction; throws idempotency_key_in_use when it was kept. */
export async function writeKeptKey(client: PoolClient, kept: KeptKey): Promise<void> {
  const written = await client.query({
    name: 'idempotency_keys_keep',
    text: `INSERT INTO idempotency_keys AS k (${KEPT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
      ON CONFLICT (subject, key) DO UPDATE SET ${SET_ANSWER}
      WHERE k.status IS NULL OR k.expires_at <= now()`,
    values: keptValues(kept),
  })
  if (written.rowCount !== 1) throw keyTaken()
}

/**
 * Keeps the keys of a group commit's changes in its transaction, in one statement; gives the
 * names (keyName) of those written. A key kept already, or named twice among them (the second
 * one), is not written: its change must be taken back out of the transaction by the caller.
 */
export async function writeKeptKeys(
  client: PoolClient,
  keys: readonly KeptKey[],
): Promise<Set<string>> {
  const first = new Map<string, KeptKey>()
  for (const kept of keys) {
    const name = keyName(kept.subject, kept.key)
    if (!first.has(name)) first.set(name, kept)
  }
  if (first.size === 0) return new Set()
  const rows = [...first.values()].map(keptValues)
  const columns = Array.from({ length: 9 }, (_, column) => rows.map((row) => row[column]))
  // ON CONFLICT DO UPDATE may not meet one row twice in a statement: the names are distinct.
  const written = await client.query<{ subject: string; key: string }>({
    name: 'idempotency_keys_keep_many',
    text: `INSERT INTO idempotency_keys AS k (${KEPT_COLUMNS})
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::smallint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[])
      ON CONFLICT (subject, key) DO UPDATE SET ${SET_ANSWER}
      WHERE k.status IS NULL OR k.expires_at <= now()
      RETURNING k.subject, k.key`,
    values: columns,
  })
  return new Set(written.rows.map((row) => keyName(row.subject, row.key)))
}

/**
 * Keeps the key of a change's request, if it carries one, in the change's transaction: `record`
 * is what the change made (undefined for a deletion). Only a change that makes an event calls it.
 */
export async function keepWithChange(
  client: PoolClient,
  context: ChangeContext | undefined,
  record: UserRecord | undefined,
): Promise<void> {
  const kept = context?.idempotency?.keep(record)
  if (kept !== undefined) await writeKeptKey(client, kept)
}
