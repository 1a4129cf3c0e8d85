import path from 'node:path'

import { createSingleKeySet, type KeySet, parseKeyList } from '../auth/keys.js'
import type { CorsOrigins } from '../http/cors.js'
import { type Logger, silentLogger } from '../log/logger.js'
import type { EventStreamsOptions } from '../routes/events/event-streams.js'
import { createService, type UserService } from '../service.js'
import { openStore } from '../store/open-store.js'
import type { Store } from '../store/store.js'
import { SERVICE_DEFAULTS } from './config.js'

/** What an embedding program gives createUserService; whatever it leaves out is config's default. */
export interface UserServiceOptions {
  /** Where the file store keeps users (and where `maintenance` is looked for). */
  dataDir?: string
  /** Any store; wins over databaseUrl and dataDir (and the store options below). */
  store?: Store
  /**
   * A PostgreSQL store on this database (§11) instead of the file store; `pg` must be installed
   * (an optional peer). It connects in open() or listen(); a dataDir is still locked when given.
   */
  databaseUrl?: string
  /** Events older than this many days are pruned (EVENTS_RETENTION_DAYS, default 30). */
  eventsRetentionDays?: number | undefined
  /** The file store's checkpoint interval (CHECKPOINT_MS, default 1000 ms). */
  checkpointMs?: number | undefined
  /** One HMAC secret (≥ 32 bytes; `base64url:` text is decoded), or keys by kid, or a KeySet. */
  secret?: string
  secrets?: Readonly<Record<string, string>>
  keys?: KeySet
  issuer?: string | undefined
  audience?: string | undefined
  leewaySeconds?: number
  /** A prefix for the /users routes and /openapi.json, such as `/v1`. */
  basePath?: string
  /** Milliseconds since the epoch (Date.now by default). */
  now?: () => number
  logger?: Logger
  maxInflight?: number
  maxEventLoopDelayMs?: number
  /** The file whose presence means maintenance; default `<dataDir>/maintenance` with a dataDir. */
  maintenanceFile?: string
  headersTimeoutMs?: number
  requestTimeoutMs?: number
  keepAliveTimeoutMs?: number
  /** Open connections above this are closed at once (default 10,000). */
  maxConnections?: number
  /** How long close() waits for requests in flight before cutting connections. */
  shutdownTimeoutMs?: number
  /** The most users one `q` list page examines (default 10,000; §9). */
  listScanBudget?: number
  /** Most `GET /events` streams open at once (MAX_EVENT_STREAMS, default 100; §10). */
  maxEventStreams?: number | undefined
  /** Tuning of the event streams (tests shorten them): heartbeat, buffer bound, stall time. */
  eventStreams?: Pick<EventStreamsOptions, 'heartbeatMs' | 'maxBufferBytes' | 'stallMs'> | undefined
  /** The largest `POST /users:import` body (IMPORT_MAX_BYTES, default 256 MiB; §12). */
  importMaxBytes?: number | undefined
  /** Bytes of import lines read ahead of the creates (default 16 MiB; see the README on imports). */
  importReadAheadBytes?: number | undefined
  /** How long an export waits for a client that stopped reading before it drops it (default 120 s). */
  exportStallTimeoutMs?: number | undefined
  /** `GET /metrics` in the Prometheus text format (§14); false: a 404 and nothing counted. Default true. */
  metrics?: boolean
  /** Origins that may call the service from a browser, or `*` (§13); default none, no CORS headers. */
  corsOrigins?: CorsOrigins | undefined
}

/**
 * The service for a program that embeds it: the options it leaves out take the defaults of
 * config.ts, as the environment's unset variables do.
 */
export function createUserService(options: UserServiceOptions): UserService {
  const { dataDir, databaseUrl } = options
  if (options.store === undefined && dataDir === undefined && databaseUrl === undefined)
    throw new Error('createUserService: give dataDir, databaseUrl or store')
  const logger = options.logger ?? silentLogger
  const now = options.now ?? Date.now
  return createService({
    ...SERVICE_DEFAULTS,
    ...definedOnly(options),
    store: openStore({
      store: options.store,
      dataDir,
      databaseUrl,
      logger,
      now,
      eventsRetentionDays: options.eventsRetentionDays,
      checkpointMs: options.checkpointMs,
    }),
    keys: resolveKeys(options),
    logger,
    now,
    maintenanceFile:
      options.maintenanceFile ??
      (dataDir === undefined ? undefined : path.join(dataDir, 'maintenance')),
    issuer: options.issuer,
    audience: options.audience,
    corsOrigins: options.corsOrigins,
  })
}

/** The options actually given: a key set to undefined takes the default, as a missing one does. */
function definedOnly<T extends object>(options: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>
  }
}

function resolveKeys(options: UserServiceOptions): KeySet {
  if (options.keys !== undefined) return options.keys
  if (options.secrets !== undefined) {
    return parseKeyList(
      Object.entries(options.secrets)
        .map(([kid, secret]) => `${kid}=${secret}`)
        .join(','),
      'secrets',
    )
  }
  if (options.secret !== undefined) return createSingleKeySet(options.secret, 'secret')
  throw new Error('createUserService: give secret, secrets or keys')
}
