import type { Logger } from '../../log/logger.js'
import type { DurableWriteObserver } from '../write-timing.js'

/** How a file store is made (FileStoreOptions): its data directory, and its timings. */
export interface FileDurabilityOptions {
  dataDir: string
  logger?: Logger
  /** Files read between two yields to the event loop while loading (default 2000). */
  loadChunk?: number
  /** Milliseconds since the epoch, for tombstones (Date.now by default). */
  now?: () => number
  /** How often the data directory and the lock are checked while open (default 1000 ms). */
  watchIntervalMs?: number
  /** Events older than this many days are pruned, whole segments at a time (default 30). */
  eventsRetentionDays?: number | undefined
  /**
   * How often the files written since the last checkpoint are fsynced and the checkpoint moved
   * (default 1000 ms); sooner when many files wait.
   */
  checkpointMs?: number | undefined
  /** Told how long each durable write and fsync took (the service's metrics). */
  timings?: DurableWriteObserver
  /** How often the files of expired `Idempotency-Key`s are deleted (default 30,000 ms). */
  keySweepMs?: number | undefined
  /** What the cache of kept keys may weigh, in bytes (default 4 MiB). */
  keyCacheBytes?: number | undefined
  /** The size of the filter of kept keys, as log2 of its bits (default 23: 1 MiB). */
  keyFilterBits?: number | undefined
}
