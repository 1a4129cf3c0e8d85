import type { Logger } from '../log/logger.js'
import type { OptionalSettings, StoreSettings } from '../settings-by-owner.js'
import { FileStore } from './file/file-store.js'
import { MemoryStore } from './memory-store.js'
import { PostgresStore } from './postgres/postgres-store.js'
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
}

/**
 * The store a configuration asks for: PostgreSQL when given a database URL, else the file store in
 * the data directory, else memory. The one place that knows the store classes: everyone else reads
 * `store.capabilities`.
 */
export function createStore(config: StoreConfig): Store {
  // Each store's options carry the names of the store settings it reads: they go on as they are,
  // so a new store setting needs no line here.
  const { logger, now, timings, databaseUrl, dataDir, ...settings } = config
  const common = {
    ...settings,
    ...(logger === undefined ? {} : { logger }),
    ...(now === undefined ? {} : { now }),
  }
  if (databaseUrl !== undefined) return new PostgresStore({ url: databaseUrl, ...common })
  if (dataDir !== undefined)
    return new FileStore({ dataDir, ...common, ...(timings === undefined ? {} : { timings }) })
  return new MemoryStore([], now === undefined ? {} : { now })
}
