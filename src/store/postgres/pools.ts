import type { Logger } from '../../log/logger.js'
import { pgFault } from './classify-error.js'
import type { PgModule, Pool, PoolClient, PoolConfig } from './pg-types.js'
import { quoteIdentifier } from './schema.js'

/**
 * How much longer than the server's statement_timeout the driver waits for an answer: the server's
 * own time-out, with its SQLSTATE, normally comes first; this one is for a server that cannot
 * send it (frozen, or behind a network partition that resets no connection).
 */
export const CLIENT_TIMEOUT_MARGIN_MS = 1000

/** How long the readiness probe waits for its answer, whatever the statement time-out. */
export const PROBE_TIMEOUT_MS = 2000

/**
 * How long ending a pool waits for the statements still running before it ends their
 * connections: by then the requests they served were answered or cut (SHUTDOWN_TIMEOUT_MS).
 */
export const END_GRACE_MS = 1000

/** What the sessions of one store are made with. */
export interface SessionSettings {
  url: string
  schema: string | undefined
  poolSize: number | undefined
  /** statement_timeout of every session (0: none, and no client-side time-out either). */
  statementTimeoutMs: number
  idleInTransactionTimeoutMs: number
}

/** The pools of one store. */
export interface StorePools {
  /** Every statement of the requests and of the background work. */
  main: Pool
  /**
   * One connection of its own for asking who blocks a stalled commit: the main pool's may all be
   * taken by writers waiting for that very lock.
   */
  side: Pool
  /** The migrations' connection: no client-side time-out (they lift the server's too). */
  unlimited: Pool
}

/** Makes the pools of one store; none connects before its first statement. */
export function createPools(pg: PgModule, settings: SessionSettings, logger: Logger): StorePools {
  const { limited, unlimited } = createPoolConfigs(settings)
  const main = new pg.Pool(limited)
  // A connection the server ends must not crash the process: the pool's listener covers idle
  // ones, and every connection gets its own for the time it is checked out (pg emits 'error' on
  // the client as well as failing its statement, and an unheard 'error' ends the process). The
  // statement's own failure is what answers and logs the request.
  main.on('error', (error) => {
    logger.warn('a database connection failed', pgFault(error))
  })
  main.on('connect', (client) => {
    client.on('error', () => undefined)
  })
  return {
    main: tracked(main),
    side: tracked(quiet(new pg.Pool({ ...limited, max: 1, idleTimeoutMillis: 1000 }))),
    unlimited: tracked(quiet(new pg.Pool({ ...unlimited, max: 1, idleTimeoutMillis: 1000 }))),
  }
}

function quiet(pool: Pool): Pool {
  pool.on('error', () => undefined)
  pool.on('connect', (client) => {
    client.on('error', () => undefined)
  })
  return pool
}

/** The connections of each pool that are checked out, for endPool. */
const checkedOut = new WeakMap<Pool, Set<PoolClient>>()

function tracked(pool: Pool): Pool {
  const clients = new Set<PoolClient>()
  checkedOut.set(pool, clients)
  pool.on('acquire', (client) => {
    clients.add(client)
  })
  pool.on('release', (_error, client) => {
    clients.delete(client)
  })
  return pool
}

/**
 * Ends a pool: its idle connections at once, and the connections of statements still running
 * after `graceMs`, whose statements then fail. pg's own end() waits for every statement, and one
 * that waits for another session's lock (or a database that no longer answers) would hold a stop
 * for as long as its time-out, and for ever with DATABASE_STATEMENT_TIMEOUT_MS=0.
 */
export async function endPool(pool: Pool, graceMs = END_GRACE_MS): Promise<void> {
  const timer = setTimeout(() => {
    for (const client of checkedOut.get(pool) ?? []) void client.end().catch(() => undefined)
  }, graceMs)
  try {
    await pool.end()
  } finally {
    clearTimeout(timer)
  }
}

/**
 * The pools' settings: `unlimited` waits for every answer as long as it takes (the migrations,
 * which lift the server's time-out too); `limited`, for everything else, fails a statement that
 * gets no answer a little after the server's time-out would have ended it.
 */
function createPoolConfigs(settings: SessionSettings): {
  unlimited: PoolConfig
  limited: PoolConfig
} {
  // A session of this service stuck in a statement or idle in a transaction (a frozen process, a
  // lost client) would hold its locks, the event counter's among them, and stop every writer and
  // the feed: the server ends it instead. Sent as startup options, not as pg's own fields, which
  // leave out a 0: "none" must override a default set on the role or the database.
  const url = splitUrlOptions(settings.url)
  const options = [
    // The URL's own first: of two `-c` of one setting the last wins, and these are the service's.
    ...(url.options === undefined ? [] : [url.options]),
    `-c statement_timeout=${settings.statementTimeoutMs}`,
    `-c idle_in_transaction_session_timeout=${settings.idleInTransactionTimeoutMs}`,
  ]
  if (settings.schema !== undefined)
    options.push(`-c search_path=${quoteIdentifier(settings.schema)},public`)
  const unlimited: PoolConfig = {
    connectionString: url.rest,
    max: settings.poolSize ?? 10,
    connectionTimeoutMillis: 5000,
    application_name: 'user-service',
    options: options.join(' '),
  }
  if (settings.statementTimeoutMs === 0) return { unlimited, limited: unlimited }
  const limited = {
    ...unlimited,
    query_timeout: settings.statementTimeoutMs + CLIENT_TIMEOUT_MARGIN_MS,
  }
  return { unlimited, limited }
}

/**
 * pg's own parameters for the service's time-outs. The two session time-outs, read from the URL,
 * it sends as startup parameters, which the server applies after the options, so they would beat
 * the service's; `query_timeout` would replace the service's own give-up (a frozen server).
 */
const SERVICE_TIMEOUTS = [
  'statement_timeout',
  'idle_in_transaction_session_timeout',
  'query_timeout',
]

/**
 * DATABASE_URL without its libpq `options` parameter, and that parameter. pg lets the URL's
 * parameters override the pool's own settings, so an `options` in the URL (a search_path, most
 * often) silently replaced the session time-outs the service sends as startup options: the server
 * then ended no stuck statement, nor the transaction of a frozen replica holding the event counter.
 * pg's `statement_timeout`, `idle_in_transaction_session_timeout` and `query_timeout` parameters
 * are dropped, as a `-c` of theirs in `options` is overridden: the time-outs are the service's.
 * Only the query is rewritten (read as the driver reads it), so that every form of URL the driver
 * takes (no host, a socket directory as `host=`) stays as it was.
 */
export function splitUrlOptions(url: string): { rest: string; options: string | undefined } {
  const at = url.indexOf('?')
  if (at < 0) return { rest: url, options: undefined }
  const params = new URLSearchParams(url.slice(at + 1))
  const options = params.get('options') ?? undefined
  const dropped = ['options', ...SERVICE_TIMEOUTS].filter((name) => params.has(name))
  if (dropped.length === 0) return { rest: url, options: undefined }
  for (const name of dropped) params.delete(name)
  const query = params.toString()
  return { rest: url.slice(0, at) + (query === '' ? '' : `?${query}`), options }
}
