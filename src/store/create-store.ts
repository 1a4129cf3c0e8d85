import type { Logger } from '../log/logger.js'
import { FileStore } from './file/file-store.js'
import { MemoryStore } from './memory-store.js'
import { PostgresStore, type PostgresStoreOptions } from './postgres/postgres-store.js'
import type { Store } from './store.js'

export interface StoreConfig {
  /** A PostgreSQL store on this database (§11); `pg` must be installed (an optional peer). */
  databaseUrl?: string | undefined
  /** Else the file store in this directory. */
  dataDir?: string | undefined
  /** Else, with neither, a store in memory only. */
  logger?: Logger | undefined
  /** Milliseconds since the epoch, for tombstones and events (Date.now by default). */
  now?: (() => number) | undefined
  /** Events older than this many days are pruned (default 30). */
  eventsRetentionDays?: number | undefined
  /** The file store's checkpoint interval (default 1000 ms). */
  checkpointMs?: number | undefined
  /** The PostgreSQL store's session time-outs and stall report (defaults in its options). */
  postgres?:
    | Pick<
        PostgresStoreOptions,
        'statementTimeoutMs' | 'idleInTransactionTimeoutMs' | 'feedStallWarnMs'
      >
    | undefined
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
    return new PostgresStore({ url: config.databaseUrl, ...common, ...config.postgres })
  if (config.dataDir !== undefined)
    return new FileStore({
      dataDir: config.dataDir,
      ...common,
      ...(config.checkpointMs === undefined ? {} : { checkpointMs: config.checkpointMs }),
    })
  return new MemoryStore([], config.now === undefined ? {} : { now: config.now })
}
