import path from 'node:path'

import { createSingleKeySet, type KeySet, parseKeyList } from '../auth/keys.js'
import type { EventStreamsOptions } from '../event-streams/event-streams.js'
import { type Logger, silentLogger } from '../log/logger.js'
import { createService, type UserService } from '../service.js'
import { SETTINGS } from '../settings.js'
import {
  defaultsOf,
  type OptionalSettings,
  pickSettings,
  type ServiceSettings,
  type StoreSettings,
} from '../settings-by-owner.js'
import { openStore } from '../store/open-store.js'
import { PostgresStore } from '../store/postgres/postgres-store.js'
import type { Store } from '../store/store.js'

/**
 * What an embedding program gives createUserService: the service's and the store's settings
 * (src/settings.ts: their meanings and defaults), each optional, and what only a program can give.
 */
export interface UserServiceOptions extends OptionalSettings<ServiceSettings & StoreSettings> {
  /**
   * Any store; wins over databaseUrl and dataDir (and over the store's settings: it takes its own).
   * With `databaseUrl`, `pg` must be installed (an optional peer); it connects in open() or
   * listen(), and a dataDir is still locked when given.
   */
  store?: Store | undefined
  /** One HMAC secret (≥ 32 bytes; `base64url:` text is decoded), or keys by kid, or a KeySet. */
  secret?: string | undefined
  secrets?: Readonly<Record<string, string>> | undefined
  keys?: KeySet | undefined
  /** Milliseconds since the epoch (Date.now by default). */
  now?: (() => number) | undefined
  logger?: Logger | undefined
  /** The file whose presence means maintenance; default `<dataDir>/maintenance` with a dataDir. */
  maintenanceFile?: string | undefined
  /** Tuning of the event streams (tests shorten them): heartbeat, buffer bound, stall time. */
  eventStreams?: Pick<EventStreamsOptions, 'heartbeatMs' | 'maxBufferBytes' | 'stallMs'> | undefined
}

/**
 * The service for a program that embeds it: the options it leaves out take the defaults of
 * src/settings.ts, as the environment's unset variables do.
 */
export function createUserService(given: UserServiceOptions): UserService {
  const options = checkedOptions(given)
  const { dataDir, databaseUrl } = options
  if (options.store === undefined && dataDir === undefined && databaseUrl === undefined)
    throw new Error('createUserService: give dataDir, databaseUrl or store')
  const logger = options.logger ?? silentLogger
  const now = options.now ?? Date.now
  return createService({
    ...defaultsOf(['service', 'bulk']),
    ...definedOnly(options),
    store: openStore({
      ...pickSettings(options, ['store']),
      store: options.store,
      postgresStore: PostgresStore,
      logger,
      now,
    }),
    keys: resolveKeys(options),
    logger,
    now,
    maintenanceFile:
      options.maintenanceFile ??
      (dataDir === undefined ? undefined : path.join(dataDir, 'maintenance')),
  })
}

/**
 * The options given as a number or a text, read by their variables' parsers as the environment's
 * values are: the same refusals (a ConfigError naming the option: `maxInflight: 0`, a NaN time-out,
 * a `databaseUrl` that is not PostgreSQL's) and the same forms (`basePath: '/api/'` is `/api`).
 * An empty text is left as it is, as an empty variable is unset. An option given in its own type
 * (a list, a rate limit) is turned back into its variable's text and read the same way, so that
 * `rateLimitAddress: { quota: 0, windowSeconds: 0 }` is refused as `RATE_LIMIT_ADDRESS=0/0` is.
 */
function checkedOptions(options: UserServiceOptions): UserServiceOptions {
  const checked: Record<string, unknown> = {}
  for (const [name, spec] of Object.entries(SETTINGS)) {
    const value: unknown = Reflect.get(options, name)
    const toText: ((value: never) => string) | undefined = spec.toText
    if (typeof value === 'number' || (typeof value === 'string' && value !== ''))
      checked[name] = spec.parse(String(value), name)
    // The option's type is its setting's, the type toText takes.
    else if (typeof value === 'object' && value !== null && toText !== undefined)
      checked[name] = spec.parse(toText(value as never), name)
  }
  // Each parser gives the type of its setting, the type the option has.
  return { ...options, ...checked }
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
