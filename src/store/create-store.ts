import type { Logger } from '../log/logger.js'
import type { OptionalSettings, StoreSettings } from '../settings-by-owner.js'
import { FileStore } from './file/file-store.js'
import { MemoryStore } from './memory-store.js'
import type { PostgresStoreOptions } from './postgres/postgres-store.js'
import type { Store } from './store.js'
import type { DurableWriteObserver } from './write-timing.js'

/**
 * The store's settings (src/settings.ts): a PostgreSQL store with `databaseUrl` (`pg` must be
 * installed, an optional peer), else the file store in `dataDir`, else, with neither, a store in
 * memory only.
 */
export interface StoreConfig extends OptionalSettings<StoreSettings> {
  logger?: Logger | undefined
  /** Milliseconds since the epoch, for tombstones and events (Date.now by default). */
  now?: (() => number) | undefined
  /** Told how long each durable write and fsync of the file store took. */
  timings?: DurableWriteObserver | undefined
  /** The PostgreSQL store's class, needed with `databaseUrl` (storeClassesFor loads it). */
  postgresStore?: PostgresStoreClass | undefined
}

export type PostgresStoreClass = new (options: PostgresStoreOptions) => Store

/**
 * The store classes a configuration needs besides the file and memory stores: the PostgreSQL
 * store's modules (a tenth of the service's) are imported only when `databaseUrl` asks for them,
 * so that a start on files neither loads nor holds them (docs/performance.md, start and idle
 * memory). An embedding program that imports the package's entry has the class already.
 */
export async function storeClassesFor(
  config: Pick<StoreConfig, 'databaseUrl'>,
): Promise<Pick<StoreConfig, 'postgresStore'>> {
  if (config.databaseUrl === undefined) return {}
  const { PostgresStore } = await import('./postgres/postgres-store.js')
  return { postgresStore: PostgresStore }
}

/**
 * The store a configuration asks for: PostgreSQL when given a database URL, else the file store in
 * the data directory, else memory. The one place that knows the store classes: everyone else reads
 * `store.capabilities`.
 */
export function createStore(config: StoreConfig): Store {
  // Each store's options carry the names of the store settings it reads: they go on as they are,
  // so a new store setting needs no line here.
  const { logger, now, timings, databaseUrl, dataDir, postgresStore, ...settings } = config
  const common = {
    ...settings,
    ...(logger === undefined ? {} : { logger }),
    ...(now === undefined ? {} : { now }),
  }
  if (databaseUrl !== undefined) {
    if (postgresStore === undefined)
      throw new Error('createStore: a databaseUrl needs postgresStore (storeClassesFor)')
    return new postgresStore({ url: databaseUrl, ...common })
  }
  if (dataDir !== undefined)
    return new FileStore({ dataDir, ...common, ...(timings === undefined ? {} : { timings }) })
  const { eventsRetentionDays } = settings
  return new MemoryStore([], {
    ...(now === undefined ? {} : { now }),
    ...(eventsRetentionDays === undefined ? {} : { eventsRetentionDays }),
  })
}
