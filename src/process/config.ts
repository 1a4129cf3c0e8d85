import { isIP } from 'node:net'
import { availableParallelism } from 'node:os'
import path from 'node:path'

import { createSingleKeySet, KeyError, type KeySet, parseKeyList } from '../auth/keys.js'
import { CorsConfigError, type CorsOrigins, parseCorsOrigins } from '../http/cors.js'
import { LOG_LEVELS, type LogLevel } from '../log/logger.js'
import { SESSION_DEFAULTS } from '../store/postgres/store-options.js'

/** The service's configuration, validated and frozen; built once from the environment. */
export interface Config {
  readonly port: number
  readonly host: string
  readonly dataDir: string
  readonly basePath: string
  /** Undefined when neither JWT_SECRET nor JWT_SECRETS is set (see first-start.ts). */
  readonly keys: KeySet | undefined
  readonly issuer: string | undefined
  readonly audience: string | undefined
  readonly leewaySeconds: number
  readonly logLevel: LogLevel
  readonly maxInflight: number
  readonly maxEventLoopDelayMs: number
  readonly headersTimeoutMs: number
  readonly requestTimeoutMs: number
  readonly keepAliveTimeoutMs: number
  readonly shutdownTimeoutMs: number
  readonly maxConnections: number
  readonly listScanBudget: number
  /** MAX_EVENT_STREAMS: most `GET /events` streams open at once (§10). */
  readonly maxEventStreams: number
  /** EVENTS_RETENTION_DAYS: events older than this are pruned (§10). */
  readonly eventsRetentionDays: number
  /** CHECKPOINT_MS: how often the file store makes the files its log covers durable (§7). */
  readonly checkpointMs: number
  /** IMPORT_MAX_BYTES: the largest `POST /users:import` body (§12). */
  readonly importMaxBytes: number
  /** METRICS: `GET /metrics` is served (on, the default) or answers 404 (off). */
  readonly metrics: boolean
  /** CORS_ORIGINS: undefined (no CORS headers), `*`, or a list of origins. */
  readonly corsOrigins: CorsOrigins | undefined
  /** DATABASE_URL: the PostgreSQL store's database (§11); undefined: the file store. */
  readonly databaseUrl: string | undefined
  /** DATABASE_STATEMENT_TIMEOUT_MS: statement_timeout of the PostgreSQL sessions (0: none). */
  readonly databaseStatementTimeoutMs: number
  /** DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: idle_in_transaction_session_timeout (0: none). */
  readonly databaseIdleInTransactionTimeoutMs: number
  /** FEED_STALL_WARN_MS: a commit kept this long from the event counter is logged and counted. */
  readonly feedStallWarnMs: number
  /** WORKERS: how many worker processes serve (node:cluster); 1: this process alone. */
  readonly workers: number
  readonly production: boolean
}

/** The defaults of the service's own options: what createUserService fills in for one left out. */
export const SERVICE_DEFAULTS = {
  basePath: '',
  leewaySeconds: 30,
  maxInflight: 1000,
  maxEventLoopDelayMs: 1000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  shutdownTimeoutMs: 10_000,
  maxConnections: 10_000,
  listScanBudget: 10_000,
  maxEventStreams: 100,
  importMaxBytes: 256 * 1024 * 1024,
  /** Import body bytes read ahead of the creates (see the README on imports). */
  importReadAheadBytes: 16 * 1024 * 1024,
  /** How long an export or an import waits for a client that stopped reading. */
  exportStallTimeoutMs: 120_000,
  metrics: true,
} as const

/** Every default, once: what an unset variable means (and, for the service's options, SERVICE_DEFAULTS). */
export const DEFAULTS = {
  ...SERVICE_DEFAULTS,
  port: 8080,
  host: '127.0.0.1',
  dataDir: 'data',
  logLevel: 'info',
  eventsRetentionDays: 30,
  checkpointMs: 1000,
  databaseStatementTimeoutMs: SESSION_DEFAULTS.statementTimeoutMs,
  databaseIdleInTransactionTimeoutMs: SESSION_DEFAULTS.idleInTransactionTimeoutMs,
  feedStallWarnMs: SESSION_DEFAULTS.stallWarnMs,
  workers: 1,
} as const

/** A value that cannot be used; the message starts with the variable's name. */
export class ConfigError extends Error {
  override name = 'ConfigError'
}

type Env = Readonly<Record<string, string | undefined>>

/** Reads every variable the service knows, refusing the first bad one by name. */
export function parseConfig(env: Env, cwd = process.cwd()): Config {
  const read = (name: string): string | undefined => {
    const value = env[name]
    return value === undefined || value.trim() === '' ? undefined : value.trim()
  }
  /** A whole number from the variable `name`, within [min, max]. */
  const integer = (name: string, fallback: number, min: number, max: number): number =>
    parseInteger(read(name), name, fallback, min, max)
  return Object.freeze({
    port: integer('PORT', DEFAULTS.port, 0, 65535),
    host: parseHost(read('HOST')),
    dataDir: path.resolve(cwd, read('DATA_DIR') ?? DEFAULTS.dataDir),
    basePath: parseBasePath(read('BASE_PATH')),
    keys: parseKeys(read('JWT_SECRET'), read('JWT_SECRETS')),
    issuer: read('JWT_ISSUER'),
    audience: read('JWT_AUDIENCE'),
    leewaySeconds: integer('JWT_LEEWAY_S', DEFAULTS.leewaySeconds, 0, 86_400),
    logLevel: parseLogLevel(read('LOG_LEVEL')),
    maxInflight: integer('MAX_INFLIGHT', DEFAULTS.maxInflight, 1, 1_000_000),
    maxEventLoopDelayMs: integer(
      'MAX_EVENT_LOOP_DELAY_MS',
      DEFAULTS.maxEventLoopDelayMs,
      1,
      3_600_000,
    ),
    headersTimeoutMs: integer('HEADERS_TIMEOUT_MS', DEFAULTS.headersTimeoutMs, 1, 3_600_000),
    requestTimeoutMs: integer('REQUEST_TIMEOUT_MS', DEFAULTS.requestTimeoutMs, 1, 3_600_000),
    keepAliveTimeoutMs: integer('KEEP_ALIVE_TIMEOUT_MS', DEFAULTS.keepAliveTimeoutMs, 1, 3_600_000),
    shutdownTimeoutMs: integer('SHUTDOWN_TIMEOUT_MS', DEFAULTS.shutdownTimeoutMs, 0, 3_600_000),
    maxConnections: integer('MAX_CONNECTIONS', DEFAULTS.maxConnections, 1, 1_000_000),
    listScanBudget: integer('LIST_SCAN_BUDGET', DEFAULTS.listScanBudget, 1, 100_000_000),
    maxEventStreams: integer('MAX_EVENT_STREAMS', DEFAULTS.maxEventStreams, 1, 100_000),
    eventsRetentionDays: integer('EVENTS_RETENTION_DAYS', DEFAULTS.eventsRetentionDays, 1, 36_500),
    checkpointMs: integer('CHECKPOINT_MS', DEFAULTS.checkpointMs, 1, 3_600_000),
    importMaxBytes: integer('IMPORT_MAX_BYTES', DEFAULTS.importMaxBytes, 1, 2 ** 40),
    databaseStatementTimeoutMs: integer(
      'DATABASE_STATEMENT_TIMEOUT_MS',
      DEFAULTS.databaseStatementTimeoutMs,
      0,
      86_400_000,
    ),
    databaseIdleInTransactionTimeoutMs: integer(
      'DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS',
      DEFAULTS.databaseIdleInTransactionTimeoutMs,
      0,
      86_400_000,
    ),
    feedStallWarnMs: integer('FEED_STALL_WARN_MS', DEFAULTS.feedStallWarnMs, 1, 3_600_000),
    metrics: parseOnOff(read('METRICS'), 'METRICS', DEFAULTS.metrics),
    corsOrigins: parseCors(read('CORS_ORIGINS')),
    ...parseStoreChoice(read('DATABASE_URL'), read('WORKERS')),
    production: read('NODE_ENV') === 'production',
  })
}

function parseInteger(
  text: string | undefined,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  if (text === undefined) return fallback
  if (!/^\d+$/.test(text)) throw new ConfigError(`${name} must be a whole number, got "${text}"`)
  const value = Number(text)
  if (value < min || value > max) {
    throw new ConfigError(`${name} must be between ${min} and ${max}, got ${text}`)
  }
  return value
}

const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/

function parseHost(text: string | undefined): string {
  if (text === undefined) return DEFAULTS.host
  if (isIP(text) !== 0 || HOSTNAME.test(text)) return text
  throw new ConfigError(`HOST must be an IP address or a host name, got "${text}"`)
}

function parseBasePath(text: string | undefined): string {
  if (text === undefined || text === '/') return DEFAULTS.basePath
  if (!/^(\/[A-Za-z0-9._~-]+)+\/?$/.test(text)) {
    throw new ConfigError(
      `BASE_PATH must look like /v1 (segments of [A-Za-z0-9._~-]), got "${text}"`,
    )
  }
  return text.endsWith('/') ? text.slice(0, -1) : text
}

/**
 * DATABASE_URL picks the PostgreSQL store. More than one worker needs it: the file store holds its
 * users in one process's memory and locks DATA_DIR for that process. The URL is never echoed (it
 * may hold a password).
 */
function parseStoreChoice(
  url: string | undefined,
  workersText: string | undefined,
): { databaseUrl: string | undefined; workers: number } {
  if (url !== undefined) {
    let protocol: string | undefined
    try {
      protocol = new URL(url).protocol
    } catch {
      protocol = undefined
    }
    if (protocol !== 'postgres:' && protocol !== 'postgresql:') {
      throw new ConfigError('DATABASE_URL must be a postgres:// or postgresql:// URL')
    }
  }
  const workers =
    workersText?.toLowerCase() === 'auto'
      ? availableParallelism()
      : parseInteger(workersText, 'WORKERS', DEFAULTS.workers, 1, 1024)
  if (workers > 1 && url === undefined) {
    throw new ConfigError(
      `WORKERS=${workersText ?? workers} needs DATABASE_URL: the file store keeps users in one process's memory and locks DATA_DIR for that one process`,
    )
  }
  return { databaseUrl: url, workers }
}

function parseOnOff(text: string | undefined, name: string, fallback: boolean): boolean {
  if (text === undefined) return fallback
  const value = text.toLowerCase()
  if (value === 'on') return true
  if (value === 'off') return false
  throw new ConfigError(`${name} must be on or off, got "${text}"`)
}

function parseLogLevel(text: string | undefined): LogLevel {
  if (text === undefined) return DEFAULTS.logLevel
  const level = LOG_LEVELS.find((candidate) => candidate === text.toLowerCase())
  if (level === undefined) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${text}"`)
  }
  return level
}

function parseKeys(single: string | undefined, list: string | undefined): KeySet | undefined {
  try {
    if (list !== undefined) return parseKeyList(list)
    if (single !== undefined) return createSingleKeySet(single)
    return undefined
  } catch (error) {
    if (error instanceof KeyError) throw new ConfigError(error.message)
    throw error
  }
}

function parseCors(text: string | undefined): CorsOrigins | undefined {
  if (text === undefined) return undefined
  try {
    return parseCorsOrigins(text)
  } catch (error) {
    if (error instanceof CorsConfigError) throw new ConfigError(`CORS_ORIGINS: ${error.message}`)
    throw error
  }
}
