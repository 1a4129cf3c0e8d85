import type { Logger } from '../log/logger.js'
import type { OptionalSettings, StoreSettings } from '../settings.js'
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
  const common = {
    ...(config.logger === undefined ? {} : { logger: config.logger }),
    ...(config.now === undefined ? {} : { now: config.now }),
    ...(config.eventsRetentionDays === undefined
      ? {}
      : { eventsRetentionDays: config.eventsRetentionDays }),
  }
  if (config.databaseUrl !== undefined)
    return new PostgresStore({
      url: config.databaseUrl,
      ...common,
      ...(config.databaseStatementTimeoutMs === undefined
        ? {}
        : { statementTimeoutMs: config.databaseStatementTimeoutMs }),
      ...(config.databaseIdleInTransactionTimeoutMs === undefined
        ? {}
        : { idleInTransactionTimeoutMs: config.databaseIdleInTransactionTimeoutMs }),
      ...(config.feedStallWarnMs === undefined ? {} : { feedStallWarnMs: config.feedStallWarnMs }),
    })
  if (config.dataDir !== undefined)
    return new FileStore({
      dataDir: config.dataDir,
      ...common,
      ...(config.checkpointMs === undefined ? {} : { checkpointMs: config.checkpointMs }),
      ...(config.timings === undefined ? {} : { timings: config.timings }),
    })
  return new MemoryStore([], config.now === undefined ? {} : { now: config.now })
}
