import { randomUUID } from 'node:crypto'

import type { ChangeContext } from '../../domain/change-context.js'
import type { KeptKey } from '../../domain/kept-key.js'
import type { KeptKeys, KeyHold } from '../kept-keys.js'
import { keyName } from '../memory-keys.js'
import type { PgConnection } from './connection.js'
import { KEPT_COLUMNS, type KeptRow, keptValues, SET_ANSWER, toKeptKey } from './kept-key-schema.js'
import { keyTaken } from './kept-key-writes.js'

/** How a store's holds are leased and its table swept (the defaults suit production). */
export interface KeyTimings {
  /** A hold not renewed for this long is free for another replica (default 10,000 ms). */
  holdLeaseMs?: number | undefined
  /** How often a store renews the holds it has (default 3,000 ms). */
  holdRenewMs?: number | undefined
  /** How often expired keys and stale holds are deleted (default 30,000 ms). */
  sweepMs?: number | undefined
}

/** A hold of this store: `turn` tells a hold taken again from the one a renewal was sent for. */
interface Held {
  readonly subject: string
  readonly key: string
  readonly turn: number
}

/** The most times a hold is tried again when the row it met went away before it was read. */
const MAX_HOLD_ATTEMPTS = 10

/**
 * The kept Idempotency-Keys of a PostgreSQL store, shared by every replica (docs/postgresql.md).
 * A hold is a row without an answer, leased to this store instance (a random holder id) and
 * renewed while its request runs, so that the hold of a replica that dies is free again within
 * the lease. A key that goes with a change is written by the change's transaction
 * (kept-key-writes.ts); this is the rest: find, hold, release, a key kept alone, and the sweep.
 * Expiry and leases are both judged by the database's clock, which every replica shares, never
 * by this process's: a replica whose clock runs ahead must not take the keys others kept for
 * expired, replay nothing and run their requests again.
 */
export class PostgresKeys implements KeptKeys {
  /** Who holds a key: one id per store instance. */
  readonly holder = randomUUID()
  readonly #db: PgConnection
  readonly #leaseMs: number
  readonly #renewMs: number
  readonly #sweepMs: number
  readonly #held = new Map<string, Held>()
  #turns = 0
  #renewing: NodeJS.Timeout | undefined
  #sweeping: NodeJS.Timeout | undefined

  constructor(db: PgConnection, timings: KeyTimings = {}) {
    this.#db = db
    this.#leaseMs = timings.holdLeaseMs ?? 10_000
    this.#renewMs = timings.holdRenewMs ?? 3000
    this.#sweepMs = timings.sweepMs ?? 30_000
  }

  /** Starts renewing this store's holds and sweeping the table. */
  start(): void {
    this.#renewing ??= setInterval(() => {
      this.renew().catch(() => undefined)
    }, this.#renewMs).unref()
    this.#sweeping ??= setInterval(() => {
      this.sweep().catch(() => undefined)
    }, this.#sweepMs).unref()
  }

  /** Stops both: the holds left lapse after their lease, as a dead replica's do. */
  stop(): void {
    clearInterval(this.#renewing)
    clearInterval(this.#sweeping)
    this.#renewing = undefined
    this.#sweeping = undefined
  }

  async find(subject: string, key: string): Promise<KeptKey | undefined> {
    const found = await this.#db.query<KeptRow>({
      name: 'idempotency_keys_find',
      text: `SELECT ${KEPT_COLUMNS} FROM idempotency_keys
        WHERE subject = $1 AND key = $2 AND status IS NOT NULL AND expires_at > now()`,
      values: [subject, key],
    })
    const row = found.rows[0]
    return row === undefined ? undefined : toKeptKey(row)
  }

  /**
   * Takes the row when there is none, or it is a stale hold or an expired key: 'held'. Else reads
   * what stopped it: a live hold (this store's own included) is 'in_use'; a kept key is 'held'
   * untouched, and `find` replays it. A row that went away in between is tried again.
   */
  async hold(subject: string, key: string): Promise<KeyHold> {
    for (let attempt = 1; ; attempt += 1) {
      const taken = await this.#db.query({
        name: 'idempotency_keys_hold',
        text: `INSERT INTO idempotency_keys AS k (subject, key, holder, held_until)
          VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')
          ON CONFLICT (subject, key) DO UPDATE SET holder = EXCLUDED.holder,
            held_until = EXCLUDED.held_until, fingerprint = NULL, status = NULL,
            content_type = NULL, location = NULL, etag = NULL, body = NULL, answered_at = NULL,
            expires_at = NULL
          WHERE (k.status IS NULL AND k.held_until < now()) OR k.expires_at <= now()`,
        values: [subject, key, this.holder, this.#leaseMs],
      })
      if (taken.rowCount === 1) {
        this.#turns += 1
        this.#held.set(keyName(subject, key), { subject, key, turn: this.#turns })
        return 'held'
      }
      const found = await this.#db.query<{ kept: boolean }>({
        name: 'idempotency_keys_holder',
        text: `SELECT status IS NOT NULL AS kept FROM idempotency_keys
          WHERE subject = $1 AND key = $2 AND (status IS NULL OR expires_at > now())`,
        values: [subject, key],
      })
      const row = found.rows[0]
      if (row !== undefined) return row.kept ? 'held' : 'in_use'
      if (attempt >= MAX_HOLD_ATTEMPTS) return 'in_use'
    }
  }

  async release(subject: string, key: string): Promise<void> {
    this.#held.delete(keyName(subject, key))
    await this.#db.query({
      name: 'idempotency_keys_release',
      text: `DELETE FROM idempotency_keys
        WHERE subject = $1 AND key = $2 AND holder = $3 AND status IS NULL`,
      values: [subject, key, this.holder],
    })
  }

  /**
   * Runs a change with its request's key (the context's `idempotency`). When the change fails
   * after its key was made (its transaction rolled back, or another request had kept the key),
   * this store's hold of the key is given back before the failure is: the request keeps no answer
   * (its caller takes the key as handed over and releases nothing), and its retry must not wait.
   */
  async withChange<T>(
    context: ChangeContext | undefined,
    change: (context: ChangeContext | undefined) => Promise<T>,
  ): Promise<T> {
    const pending = context?.idempotency
    if (pending === undefined) return change(context)
    const made: KeptKey[] = []
    const tracked: ChangeContext = {
      ...context,
      idempotency: {
        keep: (record) => {
          const kept = pending.keep(record)
          made.push(kept)
          return kept
        },
      },
    }
    try {
      return await change(tracked)
    } catch (error) {
      // A hold turned into a kept key is no longer a hold: release leaves it.
      for (const kept of made) await this.release(kept.subject, kept.key).catch(() => undefined)
      throw error
    }
  }

  /** Kept in its own statement; a key another request kept first refuses it (in use). */
  async keepAlone(kept: KeptKey): Promise<void> {
    const written = await this.#db.query({
      name: 'idempotency_keys_keep_alone',
      text: `INSERT INTO idempotency_keys AS k (${KEPT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
        ON CONFLICT (subject, key) DO UPDATE SET ${SET_ANSWER}
        WHERE k.status IS NULL OR k.expires_at <= now()`,
      values: keptValues(kept),
    })
    this.#held.delete(keyName(kept.subject, kept.key))
    if (written.rowCount !== 1) throw keyTaken()
  }

  /**
   * Extends the lease of this store's holds still without an answer, in one statement; a hold
   * that is not (kept, released, swept or taken over) is forgotten, unless it was taken again
   * while the statement ran.
   */
  async renew(): Promise<void> {
    const sent = [...this.#held.entries()]
    if (sent.length === 0) return
    const renewed = await this.#db.query<{ subject: string; key: string }>({
      name: 'idempotency_keys_renew',
      text: `UPDATE idempotency_keys AS k SET held_until = now() + $4 * interval '1 millisecond'
        FROM unnest($1::text[], $2::text[]) AS h(subject, key)
        WHERE k.subject = h.subject AND k.key = h.key AND k.holder = $3 AND k.status IS NULL
        RETURNING k.subject, k.key`,
      values: [
        sent.map(([, held]) => held.subject),
        sent.map(([, held]) => held.key),
        this.holder,
        this.#leaseMs,
      ],
    })
    const still = new Set(renewed.rows.map((row) => keyName(row.subject, row.key)))
    for (const [name, held] of sent) {
      if (!still.has(name) && this.#held.get(name)?.turn === held.turn) this.#held.delete(name)
    }
  }

  /**
   * Deletes the expired keys and the stale holds; any replica may, the result is the same. Each
   * half names its partial index's condition, so that the planner may use both.
   */
  async sweep(): Promise<number> {
    const swept = await this.#db.query({
      name: 'idempotency_keys_sweep',
      text: `DELETE FROM idempotency_keys
        WHERE (status IS NOT NULL AND expires_at <= now()) OR (status IS NULL AND held_until < now())`,
      values: [],
    })
    return swept.rowCount ?? 0
  }
}
