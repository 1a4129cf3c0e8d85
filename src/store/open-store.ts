import { createStore, type StoreConfig } from './create-store.js'
import { type DataDirLock, lockDataDir } from './file/data-dir-lock.js'
import type { Store } from './store.js'
import type { DurableWriteObserver } from './write-timing.js'

export { releaseHeldLocks } from './file/data-dir-lock.js'

export interface OpenStoreOptions extends StoreConfig {
  /** A store made by the caller (embedding); it wins over databaseUrl and dataDir. */
  store?: Store | undefined
  /**
   * Whether this process owns the data directory (default true). A cluster worker does not: its
   * primary holds the directory's lock for every worker.
   */
  ownsDataDir?: boolean | undefined
}

/**
 * A store and what the process holds for it: the one owner of start-up for the process entry,
 * the embedding API and the cluster's primary alike.
 */
export interface OpenedStore {
  readonly store: Store
  /**
   * Claims the data directory, synchronously, before anything is written there or the server
   * listens: the store's own lock (the file store's), or, for a store that keeps no files there
   * (a database beside a DATA_DIR), the process's lock on it. Throws LockError; idempotent.
   */
  claim(): void
  /** Claims, then gets the store ready without loading it (a missing driver refuses here). */
  prepare(): Promise<void>
  /** Claims, then loads what the store holds. Idempotent as the store's open() is. */
  open(): Promise<void>
  /** Closes the store, then gives the data directory back (a lock file that stays is logged). */
  close(): Promise<void>
  /**
   * Tells `observer` the timing of every durable write of a store openStore made (the service's
   * metrics, which are made after the store), besides the options' own `timings`. A store the
   * caller made reports to the observer it was made with.
   */
  observeWrites(observer: DurableWriteObserver): void
}

/**
 * Makes the store the options ask for (or takes the one given) and owns its data directory: the
 * only caller of createStore and the only place a data directory's lock is taken. A store the
 * caller made claims only what it claims itself (its own lock()).
 */
export function openStore(options: OpenStoreOptions): OpenedStore {
  const observers = new Set<DurableWriteObserver>()
  if (options.timings !== undefined) observers.add(options.timings)
  const timings: DurableWriteObserver = (timing) => {
    for (const observer of observers) observer(timing)
  }
  const store = options.store ?? createStore({ ...options, timings })
  // The process locks the directory itself when the store it made keeps no files there: the
  // first-start secret and the maintenance file still live in it.
  const processDir =
    options.store === undefined &&
    store.capabilities.dataDir === undefined &&
    options.ownsDataDir !== false
      ? options.dataDir
      : undefined
  let dirLock: DataDirLock | undefined
  const claim = (): void => {
    if (processDir === undefined) store.lock()
    else dirLock ??= lockDataDir(processDir)
  }
  return {
    store,
    claim,
    async prepare() {
      claim()
      await store.prepare()
    },
    async open() {
      claim()
      await store.open()
    },
    async close() {
      await store.close()
      if (dirLock?.held === true && !dirLock.release())
        options.logger?.warn('could not remove the lock file', { file: dirLock.file })
    },
    observeWrites(observer) {
      observers.add(observer)
    },
  }
}
