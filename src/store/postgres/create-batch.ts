import type { ChangeContext } from '../../domain/change-context.js'
import { ServiceError } from '../../domain/errors.js'
import { draftEvent } from '../../domain/event.js'
import type { KeptKey } from '../../domain/kept-key.js'
import type { UserRecord } from '../../domain/user.js'
import { keyName } from '../memory-keys.js'
import type { PgConnection } from './connection.js'
import { writeKeptKeys } from './kept-key-writes.js'
import type { PoolClient } from './pg-types.js'
import { one, rowColumns, STORED_COLUMNS } from './rows.js'

/** The most creates one transaction takes (a group commit). */
const MAX_BATCH = 500

/** A create waiting for the next batch; resolves with whether its row went in. */
interface PendingCreate {
  readonly record: UserRecord
  readonly check: (() => void) | undefined
  readonly context: ChangeContext | undefined
  readonly resolve: (inserted: boolean) => void
  readonly reject: (error: unknown) => void
}

/**
 * Creates are group-committed: those that arrive while a batch's transaction runs go in the next
 * one together (an import, or many POSTs at once, cost one COMMIT per batch, and the event
 * counter's lock is taken once per batch). `insert` resolves false for a row the batch skipped
 * (its id or email is taken, or the id was deleted, or its Idempotency-Key was kept already): the
 * caller tries it again alone, which says why. Each create's key is kept in the batch's
 * transaction with its row; a create the batch skips keeps none.
 */
export class CreateBatcher {
  readonly #connection: PgConnection
  readonly #now: () => number
  readonly #committed: () => void
  #creates: PendingCreate[] = []
  #creating = false

  constructor(connection: PgConnection, now: () => number, committed: () => void) {
    this.#connection = connection
    this.#now = now
    this.#committed = committed
  }

  insert(
    record: UserRecord,
    check: (() => void) | undefined,
    context: ChangeContext | undefined,
  ): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.#creates.push({ record, check, context, resolve, reject })
      if (!this.#creating) void this.#run()
    })
  }

  async #run(): Promise<void> {
    this.#creating = true
    while (this.#creates.length > 0) {
      const ready = this.#creates.splice(0, MAX_BATCH).filter((entry) => {
        try {
          entry.check?.()
          return true
        } catch (error) {
          entry.reject(error)
          return false
        }
      })
      if (ready.length === 0) continue
      try {
        const now = this.#now()
        const time = new Date(now).toISOString()
        const inserted = await this.#connection.transaction(
          async (client) => {
            const result = await client.query<{ id: string }>({
              name: 'users_insert_many',
              text: `INSERT INTO users (${STORED_COLUMNS})
              SELECT u.* FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::json[], $8::text[], $9::text[], $10::bigint[], $11::text[])
                AS u(id, email, email_key, name, name_key, status, metadata, created_at, updated_at, version, tokens_valid_after)
              WHERE NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.id = u.id)
              ON CONFLICT DO NOTHING RETURNING id`,
              values: rowColumns(ready.map((entry) => entry.record)),
            })
            return keepKeys(client, ready, new Set(result.rows.map((row) => row.id)))
          },
          (ids) =>
            ready
              .filter((entry) => ids.has(entry.record.user.id))
              .flatMap((entry) =>
                one(draftEvent(undefined, entry.record, entry.record.user.id, time, entry.context)),
              ),
          this.#committed,
        )
        for (const entry of ready) entry.resolve(inserted.has(entry.record.user.id))
      } catch (error) {
        // Input the database refused is one row's fault: each row is tried alone, and only the
        // one it belongs to is refused.
        const alone =
          ready.length > 1 && error instanceof ServiceError && error.code === 'bad_request'
        for (const entry of ready) {
          if (alone) entry.resolve(false)
          else entry.reject(error)
        }
      }
    }
    this.#creating = false
  }
}

/**
 * Keeps the keys of the creates inserted (`ids`), in the batch's transaction, and gives the ids
 * that stay: a create whose key was kept already, or taken by an earlier create of the batch, has
 * its row deleted again (it was inserted by this transaction: no event, no tombstone).
 */
async function keepKeys(
  client: PoolClient,
  ready: readonly PendingCreate[],
  ids: Set<string>,
): Promise<Set<string>> {
  const keyed: [id: string, kept: KeptKey][] = []
  for (const entry of ready) {
    const id = entry.record.user.id
    const kept = ids.has(id) ? entry.context?.idempotency?.keep(entry.record) : undefined
    if (kept !== undefined) keyed.push([id, kept])
  }
  if (keyed.length === 0) return ids
  const written = await writeKeptKeys(
    client,
    keyed.map(([, kept]) => kept),
  )
  const lost = new Set<string>()
  for (const [id, kept] of keyed) {
    const name = keyName(kept.subject, kept.key)
    // The first create of a name keeps it; a later one with the same name lost it.
    if (written.has(name)) written.delete(name)
    else lost.add(id)
  }
  if (lost.size === 0) return ids
  await client.query({
    name: 'users_insert_taken_back',
    text: 'DELETE FROM users WHERE id = ANY($1)',
    values: [[...lost]],
  })
  return new Set([...ids].filter((id) => !lost.has(id)))
}
