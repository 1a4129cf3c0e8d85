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
  isReadOnlyRefusal,
  isUniqueViolation,
  pgFault,
  toInputError,
} from './classify-error.js'
import { BLOCKERS_SQL, CommitStallWatch } from './commit-stall.js'
import { DatabaseHealth } from './database-health.js'
import { loadPg } from './driver.js'
import type {
  PgModule,
  Pool,
  PoolClient,
  PoolConfig,
  QueryResult,
  QueryResultRow,
} from './pg-types.js'
import { quoteIdentifier } from './schema.js'
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
  readonly #health: DatabaseHealth
  #probe: NodeJS.Timeout | undefined
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
    const config: PoolConfig = {
      connectionString: this.#options.url,
      max: this.#options.poolSize ?? 10,
      connectionTimeoutMillis: 5000,
      application_name: 'user-service',
    }
    // A session of this service stuck in a statement or idle in a transaction (a frozen process, a
    // lost client) would hold its locks, the event counter's among them, and stop every writer and
    // the feed: the server ends it instead. Sent as startup options, not as pg's own fields, which
    // leave out a 0: "none" must override a default set on the role or the database.
    const options = [
      `-c statement_timeout=${this.#options.statementTimeoutMs}`,
      `-c idle_in_transaction_session_timeout=${this.#options.idleInTransactionTimeoutMs}`,
    ]
    if (this.#options.schema !== undefined)
      options.push(`-c search_path=${quoteIdentifier(this.#options.schema)},public`)
    config.options = options.join(' ')
    const pool = new pg.Pool(config)
    // A connection the server ends must not crash the process: the pool's listener covers idle
    // ones, and every connection gets its own for the time it is checked out (pg emits 'error' on
    // the client as well as failing its statement, and an unheard 'error' ends the process). The
    // statement's own failure is what answers and logs the request.
    pool.on('error', (error) => {
      this.#options.logger.warn('a database connection failed', pgFault(error))
    })
    pool.on('connect', (client) => {
      client.on('error', () => undefined)
    })
    this.#pool = pool
    this.#side = new pg.Pool({ ...config, max: 1, idleTimeoutMillis: 1000 })
    this.#side.on('error', () => undefined)
    this.#side.on('connect', (client) => {
      client.on('error', () => undefined)
    })
  }

  /** Asks the database whether it answers every `intervalMs`, for /readyz between requests. */
  startProbe(intervalMs: number): void {
    this.#probe = setInterval(() => {
      void this.#check()
    }, intervalMs)
    this.#probe.unref()
  }

  async end(): Promise<void> {
    clearInterval(this.#probe)
    this.#probe = undefined
    const pool = this.#pool
    this.#pool = undefined
    const side = this.#side
    this.#side = undefined
    await side?.end()
    await pool?.end()
  }

  /** A client of its own (a migration, a listener); the caller releases it. */
  client(): Promise<PoolClient> {
    return this.#connection().connect()
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
      await client.query('ROLLBACK').catch(() => {
        broken = true
      })
      if (isUniqueViolation(error, 'users_email_key')) throw duplicateEmail()
      if (isUniqueViolation(error, 'users_pkey')) throw duplicateId(pkeyId(error))
      if (committing && commitMayHaveLanded(error)) {
        this.#health.failed(error)
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
    if (pool === undefined) return
    try {
      const found = await pool.query<{ writable: boolean }>(
        "SELECT current_setting('transaction_read_only') = 'off' AS writable",
      )
      this.#health.answered()
      this.#health.writable(found.rows[0]?.writable !== false)
    } catch (error) {
      this.#health.failed(error)
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
