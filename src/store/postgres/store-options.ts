import type { Logger } from '../../log/logger.js'
import { SETTINGS } from '../../settings.js'
import type { KeyTimings } from './kept-keys.js'
import type { PgModule } from './pg-types.js'

/** The defaults of the sessions' time-outs and of the stall report: the settings' (src/settings.ts). */
export const SESSION_DEFAULTS = Object.freeze({
  statementTimeoutMs: SETTINGS.databaseStatementTimeoutMs.default,
  idleInTransactionTimeoutMs: SETTINGS.databaseIdleInTransactionTimeoutMs.default,
  stallWarnMs: SETTINGS.feedStallWarnMs.default,
})

/** How a PostgresStore connects, and the timings of its probe, feed and pruning. */
export interface PostgresStoreOptions {
  /** postgres:// or postgresql:// */
  url: string
  logger?: Logger
  /** A schema of its own (created when missing) instead of the role's default search_path. */
  schema?: string
  /** Most connections of this process (default 10). */
  poolSize?: number
  /** Milliseconds since the epoch, for tombstones (Date.now by default). */
  now?: () => number
  /** How often the database is probed for /readyz (default 1000 ms). */
  probeIntervalMs?: number
  /** The driver; loaded with import('pg') when not given. */
  pg?: PgModule
  /** Events older than this many days are pruned (default 30). */
  eventsRetentionDays?: number | undefined
  /** How often a stream looks for events other replicas committed (default 200 ms). */
  eventPollMs?: number
  /**
   * statement_timeout of the store's sessions (default 30,000 ms; 0: none). The store's options
   * carry the names of their settings (src/settings.ts), so createStore hands them on as they are.
   */
  databaseStatementTimeoutMs?: number | undefined
  /** idle_in_transaction_session_timeout of the store's sessions (default 10,000 ms; 0: none). */
  databaseIdleInTransactionTimeoutMs?: number | undefined
  /** A commit that waits this long for the event counter is reported (default 5,000 ms). */
  feedStallWarnMs?: number | undefined
  /** The lease and renewal of Idempotency-Key holds and the sweep of kept keys (tests shorten them). */
  keyTimings?: KeyTimings | undefined
}
