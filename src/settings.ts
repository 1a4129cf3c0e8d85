/**
 * Every setting of the service, once: its name, the environment variables it is read from, its
 * default, its parser and what it means. `Config` (process/config.ts), the service's options, the
 * embedding options, the store's and the bulk routes' options derive from this table by type, so
 * adding a setting is one entry here plus the code that uses it (docs/configuration.md is checked
 * against the table by test/docs/configuration.test.ts).
 */
import type { LogLevel } from './log/logger.js'
import {
  integer,
  parseBasePath,
  parseCors,
  parseDatabaseUrl,
  parseHost,
  parseKeys,
  parseLogLevel,
  parseNetworks,
  parseOnOff,
  parseProxies,
  parseRateLimit,
  parseRetrySchedule,
  parseWorkers,
} from './setting-parsers.js'

export { ConfigError } from './setting-parsers.js'

/**
 * Who reads a setting: the process entry alone, the store it builds, the service, or the bulk
 * routes (given by the service). The options types below are picked by it.
 */
export type SettingOwner = 'process' | 'store' | 'service' | 'bulk'

export interface Setting<T, O extends SettingOwner = SettingOwner> {
  readonly owner: O
  /**
   * The environment variables it is read from, the first one set winning; none for an option of
   * the embedding API only.
   */
  readonly env: readonly string[]
  /** What an unset variable, or an option left out, means. */
  readonly default: T
  /**
   * Turns a variable's trimmed, non-empty text into the value, or throws ConfigError naming the
   * variable.
   */
  readonly parse: (text: string, name: string) => T
  /** What it means, in one line. */
  readonly doc: string
}

function setting<T, O extends SettingOwner>(spec: Setting<T, O>): Setting<T, O> {
  return spec
}

/** Every setting. Adding one: an entry here, then the code that reads it from its options. */
export const SETTINGS = {
  port: setting({
    owner: 'process',
    env: ['PORT'],
    default: 8080,
    parse: integer(0, 65535),
    doc: 'TCP port; 0 picks a free one',
  }),
  host: setting({
    owner: 'process',
    env: ['HOST'],
    default: '127.0.0.1',
    parse: parseHost,
    doc: 'address to bind',
  }),
  dataDir: setting({
    owner: 'store',
    env: ['DATA_DIR'],
    default: 'data',
    // Relative to the working directory: parseConfig resolves it, the default included.
    parse: (text) => text,
    doc: 'where users, the lock, the quarantine and `maintenance` live',
  }),
  databaseUrl: setting({
    owner: 'store',
    env: ['DATABASE_URL'],
    default: undefined,
    parse: parseDatabaseUrl,
    doc: 'a PostgreSQL store on this database instead of the file store',
  }),
  eventsRetentionDays: setting({
    owner: 'store',
    env: ['EVENTS_RETENTION_DAYS'],
    default: 30,
    parse: integer(1, 36_500),
    doc: 'events older than this many days are pruned',
  }),
  checkpointMs: setting({
    owner: 'store',
    env: ['CHECKPOINT_MS'],
    default: 1000,
    parse: integer(1, 3_600_000),
    doc: 'how often the file store makes the files its log covers durable (ms)',
  }),
  databaseStatementTimeoutMs: setting({
    owner: 'store',
    env: ['DATABASE_STATEMENT_TIMEOUT_MS'],
    default: 30_000,
    parse: integer(0, 86_400_000),
    doc: "statement_timeout of the PostgreSQL store's sessions (ms; 0: none)",
  }),
  databaseIdleInTransactionTimeoutMs: setting({
    owner: 'store',
    env: ['DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS'],
    default: 10_000,
    parse: integer(0, 86_400_000),
    doc: "idle_in_transaction_session_timeout of the PostgreSQL store's sessions (ms; 0: none)",
  }),
  feedStallWarnMs: setting({
    owner: 'store',
    env: ['FEED_STALL_WARN_MS'],
    default: 5_000,
    parse: integer(1, 3_600_000),
    doc: 'a commit kept this long from the event counter is logged and counted (ms)',
  }),
  basePath: setting({
    owner: 'service',
    env: ['BASE_PATH'],
    default: '',
    parse: parseBasePath,
    doc: 'a prefix for the /users routes and /openapi.json, such as /v1',
  }),
  keys: setting({
    owner: 'process',
    env: ['JWT_SECRETS', 'JWT_SECRET'],
    default: undefined,
    parse: parseKeys,
    doc: 'the HMAC keys; none: the first start writes one to DATA_DIR/.jwt-secret',
  }),
  issuer: setting({
    owner: 'service',
    env: ['JWT_ISSUER'],
    default: undefined,
    parse: (text) => text,
    doc: 'tokens must carry this `iss`',
  }),
  audience: setting({
    owner: 'service',
    env: ['JWT_AUDIENCE'],
    default: undefined,
    parse: (text) => text,
    doc: "tokens' `aud` must hold this",
  }),
  leewaySeconds: setting({
    owner: 'service',
    env: ['JWT_LEEWAY_S'],
    default: 30,
    parse: integer(0, 86_400),
    doc: 'clock leeway for exp, nbf and iat, in seconds',
  }),
  logLevel: setting<LogLevel, 'process'>({
    owner: 'process',
    env: ['LOG_LEVEL'],
    default: 'info',
    parse: parseLogLevel,
    doc: 'the least severe level logged',
  }),
  maxInflight: setting({
    owner: 'service',
    env: ['MAX_INFLIGHT'],
    default: 1000,
    parse: integer(1, 1_000_000),
    doc: 'requests in flight above which /users answers 503 overloaded',
  }),
  maxEventLoopDelayMs: setting({
    owner: 'service',
    env: ['MAX_EVENT_LOOP_DELAY_MS'],
    default: 1000,
    parse: integer(1, 3_600_000),
    doc: 'event-loop delay above which /users answers 503 overloaded',
  }),
  headersTimeoutMs: setting({
    owner: 'service',
    env: ['HEADERS_TIMEOUT_MS'],
    default: 10_000,
    parse: integer(1, 3_600_000),
    doc: 'a client must send its headers within this',
  }),
  requestTimeoutMs: setting({
    owner: 'service',
    env: ['REQUEST_TIMEOUT_MS'],
    default: 30_000,
    parse: integer(1, 3_600_000),
    doc: 'a client must send its whole request within this',
  }),
  keepAliveTimeoutMs: setting({
    owner: 'service',
    env: ['KEEP_ALIVE_TIMEOUT_MS'],
    default: 5_000,
    parse: integer(1, 3_600_000),
    doc: 'idle keep-alive connections are closed after this',
  }),
  shutdownTimeoutMs: setting({
    owner: 'service',
    env: ['SHUTDOWN_TIMEOUT_MS'],
    default: 10_000,
    parse: integer(0, 3_600_000),
    doc: 'how long close() waits for requests in flight before cutting them',
  }),
  maxConnections: setting({
    owner: 'service',
    env: ['MAX_CONNECTIONS'],
    default: 10_000,
    parse: integer(1, 1_000_000),
    doc: 'open connections above this are closed at once',
  }),
  listScanBudget: setting({
    owner: 'service',
    env: ['LIST_SCAN_BUDGET'],
    default: 10_000,
    parse: integer(1, 100_000_000),
    doc: 'the most users one `q` list page examines',
  }),
  maxEventStreams: setting({
    owner: 'service',
    env: ['MAX_EVENT_STREAMS'],
    default: 100,
    parse: integer(1, 100_000),
    doc: 'most GET /events streams open at once',
  }),
  importMaxBytes: setting({
    owner: 'bulk',
    env: ['IMPORT_MAX_BYTES'],
    default: 256 * 1024 * 1024,
    parse: integer(1, 2 ** 40),
    doc: 'the largest POST /users:import body',
  }),
  // The body is read while the creates go on, so that an import of this size is wholly received,
  // out of REQUEST_TIMEOUT_MS's reach, however slowly the store takes it; past it, the body is
  // read as fast as users are stored.
  importReadAheadBytes: setting({
    owner: 'bulk',
    env: [],
    default: 16 * 1024 * 1024,
    parse: integer(1, 2 ** 40),
    doc: 'import body bytes read ahead of the creates (see docs/bulk.md)',
  }),
  exportStallTimeoutMs: setting({
    owner: 'bulk',
    env: [],
    default: 120_000,
    parse: integer(1, 3_600_000),
    doc: 'how long an export or an import waits for a client that stopped reading',
  }),
  metrics: setting({
    owner: 'service',
    env: ['METRICS'],
    default: true,
    parse: parseOnOff,
    doc: 'GET /metrics is served (on) or answers 404 (off)',
  }),
  corsOrigins: setting({
    owner: 'service',
    env: ['CORS_ORIGINS'],
    default: undefined,
    parse: parseCors,
    doc: 'origins a browser page may call the service from, or `*`',
  }),
  rateLimitSubject: setting({
    owner: 'service',
    env: ['RATE_LIMIT_SUBJECT'],
    default: undefined,
    parse: parseRateLimit,
    doc: 'requests per window for each token subject: `Q/W` (Q per W seconds) or `off`',
  }),
  rateLimitAddress: setting({
    owner: 'service',
    env: ['RATE_LIMIT_ADDRESS'],
    default: undefined,
    parse: parseRateLimit,
    doc: 'requests per window for each client address without a valid token: `Q/W` or `off`',
  }),
  idempotencyTtlS: setting({
    owner: 'service',
    env: ['IDEMPOTENCY_TTL_S'],
    default: 86_400,
    parse: integer(1, 604_800),
    doc: 'seconds an `Idempotency-Key` and its answer are kept after the answer',
  }),
  rateLimitMaxClients: setting({
    owner: 'service',
    env: ['RATE_LIMIT_MAX_CLIENTS'],
    default: 100_000,
    parse: integer(1, 10_000_000),
    doc: 'the most subjects and addresses the rate limits count at once',
  }),
  trustedProxies: setting<readonly string[], 'service'>({
    owner: 'service',
    env: ['TRUSTED_PROXIES'],
    default: [],
    parse: parseProxies,
    doc: 'proxies (addresses, CIDR blocks) whose X-Forwarded-For names the client',
  }),
  webhookTimeoutMs: setting({
    owner: 'service',
    env: ['WEBHOOK_TIMEOUT_MS'],
    default: 15_000,
    parse: integer(1, 120_000),
    doc: 'a webhook attempt must get its answer status and headers within this (ms)',
  }),
  webhookRetrySchedule: setting<readonly number[], 'service'>({
    owner: 'service',
    env: ['WEBHOOK_RETRY_SCHEDULE'],
    default: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
    parse: parseRetrySchedule,
    doc: 'the delays (ms) before the retries of a failed webhook attempt, before jitter',
  }),
  webhookAllowNetworks: setting<readonly string[], 'service'>({
    owner: 'service',
    env: ['WEBHOOK_ALLOW_NETWORKS'],
    default: [],
    parse: parseNetworks,
    doc: 'CIDR blocks webhooks may reach although they are not global unicast',
  }),
  webhooksMax: setting({
    owner: 'service',
    env: ['WEBHOOKS_MAX'],
    default: 20,
    parse: integer(1, 1000),
    doc: 'the most webhook endpoints the service keeps',
  }),
  workers: setting({
    owner: 'process',
    env: ['WORKERS'],
    default: 1,
    parse: parseWorkers,
    doc: 'worker processes on one port (node:cluster); auto: one per core',
  }),
  production: setting({
    owner: 'process',
    env: ['NODE_ENV'],
    default: false,
    parse: (text) => text === 'production',
    doc: 'NODE_ENV=production refuses to start without a configured secret',
  }),
} as const
