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
  listText,
  parseBasePath,
  parseCors,
  parseDatabaseUrl,
  parseHost,
  parseKeys,
  parseLogLevel,
  parseOnOff,
  parseWorkers,
} from './setting-parsers.js'

export { ConfigError } from './setting-parsers.js'

import { setting } from './setting-spec.js'
import { TRAFFIC_SETTINGS } from './settings-traffic.js'

export type { Setting, SettingOwner } from './setting-spec.js'

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
    doc: 'how long an export, an import or any answer the socket could not take at once waits for a client that stopped reading',
  }),
  metrics: setting({
    owner: 'service',
    env: ['METRICS'],
    default: true,
    parse: parseOnOff,
    doc: 'GET /metrics is served (on) or answers 404 (off)',
  }),
  adminPage: setting({
    owner: 'service',
    env: ['ADMIN_PAGE'],
    default: true,
    parse: parseOnOff,
    doc: 'the admin page, GET /admin and its files, is served (on) or answers 404 (off)',
  }),
  corsOrigins: setting({
    owner: 'service',
    env: ['CORS_ORIGINS'],
    default: undefined,
    parse: parseCors,
    toText: (origins) => (origins === '*' ? '*' : listText(origins ?? [])),
    doc: 'origins a browser page may call the service from, or `*`',
  }),
  ...TRAFFIC_SETTINGS,
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
    doc: 'NODE_ENV=production (exactly) refuses to start without a configured secret',
  }),
} as const
