import { ServiceError } from '../../domain/errors.js'
import type { EventDraft } from '../../domain/event.js'
import { isCanonicalUuid } from '../../domain/uuid7.js'
import type { Logger } from '../../log/logger.js'
import type { StoreHealth } from '../store.js'
import { duplicateEmail, duplicateId } from '../store-errors.js'
import { appendEvents } from './append-events.js'
import {
  classifyPgError,
  commitMayHaveLanded,
  commitOutcomeUnknown,
  databaseUnavailable,
  isQueryTimeout,
  isReadOnlyRefusal,
  isUniqueViolation,
  storeClosing,
  toInputError,
} from './classify-error.js'
import { BLOCKERS_SQL, CommitStallWatch } from './commit-stall.js'
import { DatabaseHealth } from './database-health.js'
import { loadPg } from './driver.js'
import type { PgModule, Pool, PoolClient, QueryResult, QueryResultRow } from './pg-types.js'
import { createPools, endPool, PROBE_TIMEOUT_MS } from './pools.js'
import type { SqlShape } from './sql.js'

export interface PgConnectionOptions {
  url: string
  logger: Logger
  schema: string | undefined
  poolSize: number | undefined
  pg: PgModule | undefined
  /** statement_timeout of every session (0: none). */
  statementTimeoutMs: number
  /** idle_in_transaction_session_timeout of every session (0: none). */
  idleInTransactionTimeoutMs: number
  /** How long a transaction's tail may wait for the event counter before it is reported. */
  stallWarnMs: number
  /** The newest event id this process saw committed (PostgresEventFeed.seenHead). */
  seenHead: () => bigint
}

/** A statement: a named prepared statement and its values. */
export type Statement = SqlShape | { name: string; text: string; values: unknown[] }

/**
 * The pool of one PostgreSQL store and what its answers say about the database: every statement
 * goes through `query` or `transaction`, which classify a failure (the client's input, or the
 * database unavailable, which counts against readiness) and keep the store's health.
 */
export class PgConnection {
  readonly #options: PgConnectionOptions
  #pool: Pool | undefined
  /**
   * One connection of its own for asking who blocks a stalled commit: the pool's may all be
   * taken by writers waiting for that very lock.
   */
  #side: Pool | undefined
  /** The migrations' connection: no client-side time-out (they lift the server's too). */
  #unlimited: Pool | undefined
  readonly #health: DatabaseHealth
  #probe: NodeJS.Timeout | undefined
  #probing = false
  /** end() has begun: what fails from now on fails for that, not for the database. */
  #closing = false
  /** Transactions' tails that wait for the event counter (a feed that cannot advance). */
  readonly stalls: CommitStallWatch

  constructor(options: PgConnectionOptions) {
    this.#options = options
    this.#health = new DatabaseHealth(options.logger)
    this.stalls = new CommitStallWatch(options.stallWarnMs, options.logger, async (pid) => {
      if (this.#side === undefined) throw new Error('the PostgreSQL store is not open')
      const found = await this.#side.query<{
        pid: number
        age: number | null
        state: string | null
        application: string | null
      }>(BLOCKERS_SQL, [pid])
      return found.rows.map((row) => ({
        pid: row.pid,
        transactionAgeSeconds: row.age,
        state: row.state,
        application: row.application,
      }))
    })
  }

  get health(): StoreHealth {
    return this.#health.state
  }

  /** Loads the driver (refusing the start when it is missing) and makes the pool; idempotent. */
  async connect(): Promise<void> {
    if (this.#pool !== undefined) return
    const pg = this.#options.pg ?? (await loadPg())
    const pools = createPools(pg, this.#options, this.#options.logger)
    this.#pool = pools.main
    this.#side = pools.side
    this.#unlimited = pools.unlimited
  }

  /** Asks the database whether it answers every `intervalMs`, for /readyz between requests. */
  startProbe(intervalMs: number): void {
    this.#probe = setInterval(() => {
      void this.#check()
    }, intervalMs)
    this.#probe.unref()
  }

  async end(): Promise<void> {
    this.#closing = true
    clearInterval(this.#probe)
    this.#probe = undefined
    const pool = this.#pool
    this.#pool = undefined
    const side = this.#side
    this.#side = undefined
    const unlimited = this.#unlimited
    this.#unlimited = undefined
    // Statements still running when the store closes are cut (a stop must not wait for a lock).
    await Promise.all([side, unlimited, pool].map((each) => each && endPool(each)))
  }

  /** A client of its own (a listener); the caller releases it. */
  client(): Promise<PoolClient> {
    return this.#connection().connect()
  }

  /**
   * A client that waits for every answer as long as it takes, for the migrations at start (a
   * rewrite, the wait for another replica's migration); the caller releases it.
   */
  migrationClient(): Promise<PoolClient> {
    if (this.#unlimited === undefined) throw new Error('the PostgreSQL store is not open')
    return this.#unlimited.connect()
  }

  query<R extends QueryResultRow>(shape: Statement): Promise<QueryResult<R>> {
    let pending: Promise<QueryResult<R>>
    try {
      // The driver copies the statement and only reads its values: no copy of ours per request.
      pending = this.#connection().query<R>(shape)
    } catch (error) {
      return Promise.reject(this.#failure(error))
    }
    return pending.then(this.#succeeded, this.#failed)
  }

  readonly #succeeded = <T>(result: T): T => {
    this.#health.answered()
    return result
  }

  readonly #failed = (error: unknown): never => {
    throw this.#failure(error)
  }

  /**
   * Runs the statements of one write in one transaction, and appends the events of its changes
   * (docs/events.md), those `events` gives, in the same transaction, last.
   */
  async transaction<T>(
    work: (client: PoolClient) => Promise<T>,
    events: (result: T) => readonly EventDraft[],
    committed: () => void,
  ): Promise<T> {
    let client: PoolClient
    try {
      client = await this.#connection().connect()
    } catch (error) {
      throw this.#unavailable(error)
    }
    let broken = false
    let committing = false
    const commit = (): Promise<unknown> => {
      committing = true
      return client.query('COMMIT')
    }
    try {
      await client.query('BEGIN')
      const result = await work(client)
      const drafts = events(result)
      if (drafts.length === 0) await commit()
      else
        await this.stalls.watch(backendPid(client), async () => {
          await appendEvents(client, drafts, this.#options.seenHead())
          await commit()
        })
      this.#health.answered()
      this.#health.writable(true)
      if (drafts.length > 0) committed()
      return result
    } catch (error) {
      // A statement the driver gave up on still runs, or waits, on the server, and the
      // connection would answer nothing else before it: ROLLBACK would wait as long again.
      // Dropping the connection ends the session, and the server rolls its transaction back.
      if (isQueryTimeout(error)) broken = true
      else
        await client.query('ROLLBACK').catch(() => {
          broken = true
        })
      if (isUniqueViolation(error, 'users_email_key')) throw duplicateEmail()
      if (isUniqueViolation(error, 'users_pkey')) throw duplicateId(pkeyId(error))
      if (committing && commitMayHaveLanded(error)) {
        if (!this.#closing) this.#health.failed(error)
        throw commitOutcomeUnknown(error)
      }
      throw this.#failure(error)
    } finally {
      // A connection whose state is unknown is dropped rather than given to the next write.
      client.release(broken)
    }
  }

  async #check(): Promise<void> {
    const pool = this.#pool
    // One probe at a time: probes of a database that does not answer would take the pool.
    if (pool === undefined || this.#probing) return
    this.#probing = true
    // The whole probe is bounded, the wait for a connection included: with every connection of
    // the pool held by statements the database does not answer, that wait (up to the 5 s
    // connection time-out) came before the statement's own time-out, and /readyz said ready for
    // up to 6 s. The probe itself runs on until it ends, one at a time.
    const late = setTimeout(() => {
      this.#health.failed(new Error(`no answer to the readiness probe in ${PROBE_TIMEOUT_MS} ms`))
    }, PROBE_TIMEOUT_MS)
    try {
      // A time-out of its own, short: /readyz turns 503 soon after the database stops answering.
      const found = await pool.query<{ writable: boolean }>({
        text: "SELECT current_setting('transaction_read_only') = 'off' AS writable",
        query_timeout: PROBE_TIMEOUT_MS,
      })
      this.#health.answered()
      this.#health.writable(found.rows[0]?.writable !== false)
    } catch (error) {
      this.#health.failed(error)
    } finally {
      clearTimeout(late)
      this.#probing = false
    }
  }

  /**
   * A failed statement: input the database refused is the client's (bad_request, and the
   * database did answer); a write refused by a read-only database is storage_unavailable from a
   * database that answers; anything else is storage_unavailable, and the database unanswering.
   * Each of the last two counts against readiness.
   */
  #failure(error: unknown): ServiceError {
    if (error instanceof ServiceError) return error
    if (this.#closing) return storeClosing(error)
    if (classifyPgError(error) === 'input') {
      this.#health.answered()
      return toInputError(error)
    }
    if (isReadOnlyRefusal(error)) {
      this.#health.refusedWrite()
      return databaseUnavailable(error)
    }
    return this.#unavailable(error)
  }

  #unavailable(error: unknown): ServiceError {
    if (error instanceof ServiceError) return error
    if (this.#closing) return storeClosing(error)
    this.#health.failed(error)
    return databaseUnavailable(error)
  }

  #connection(): Pool {
    // A plain fault on purpose: a statement after close() answers storage_unavailable, as a lost
    // connection does.
    if (this.#pool === undefined) throw new Error('the PostgreSQL store is not open')
    return this.#pool
  }
}

/** The server process of a connection (the driver keeps it from the start-up), if known. */
function backendPid(client: PoolClient): number | undefined {
  const pid = (client as { processID?: unknown }).processID
  return typeof pid === 'number' ? pid : undefined
}

/** The id a primary-key violation names (`Key (id)=(…) already exists.`), or a placeholder. */
function pkeyId(error: unknown): string {
  const detail = (error as { detail?: unknown }).detail
  const id = typeof detail === 'string' ? /\(id\)=\(([^)]*)\)/.exec(detail)?.[1] : undefined
  return id !== undefined && isCanonicalUuid(id) ? id : 'given'
}
