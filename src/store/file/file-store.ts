import { IndexedStore } from '../indexed-store.js'
import { FileDurability } from './file-durability.js'
import type { FileDurabilityOptions } from './file-durability-options.js'
import type { KeyFiles } from './key-files.js'

export type FileStoreOptions = FileDurabilityOptions

/**
 * The default store: the shared index (IndexedStore) made durable by the data directory's files
 * and write-ahead log (FileDurability): one JSON file per user in `DATA_DIR/users/`, tombstones in
 * `DATA_DIR/tombstones/`, the change feed's log in `DATA_DIR/events/`, kept `Idempotency-Key`s in
 * `DATA_DIR/keys/`. It owns the data directory
 * through a lock taken at lock() or open().
 */
export class FileStore extends IndexedStore {
  readonly dataDir: string
  readonly usersDir: string
  readonly quarantineDir: string
  readonly tombstonesDir: string
  readonly eventsDir: string
  /** The kept `Idempotency-Key`s' files (`store.keys` is these, through the store's writes). */
  readonly keyFiles: KeyFiles
  readonly #files: FileDurability

  constructor(options: FileStoreOptions) {
    const files = new FileDurability(options)
    super(files, { now: options.now })
    this.#files = files
    this.dataDir = files.dataDir
    this.usersDir = files.usersDir
    this.quarantineDir = files.quarantineDir
    this.tombstonesDir = files.tombstonesDir
    this.eventsDir = files.eventsDir
    this.keyFiles = files.keys
  }

  /** Expired keys' journals and old event segments stay while `paused` says so (maintenance). */
  override pauseUpkeep(paused: () => boolean): void {
    this.#files.pauseUpkeep(paused)
  }

  /** Drops whole segments older than the retention; requests go on meanwhile. */
  pruneEvents(): Promise<void> {
    return this.#files.pruneEvents()
  }
}
