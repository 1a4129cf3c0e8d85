import path from 'node:path'

import { internalFault } from '../../domain/errors.js'
import type { ChangeEvent, EventHead } from '../../domain/event.js'
import type { Tombstone } from '../../domain/tombstone.js'
import type { UserRecord } from '../../domain/user.js'
import { type Logger, silentLogger } from '../../log/logger.js'
import { EventIndex } from '../feed/event-index.js'
import { IndexedStore } from '../indexed-store.js'
import type { StoreCapabilities } from '../store.js'
import { DurableDirectory, makeDurableDirectory, WriteError } from './atomic-write.js'
import { DataDirLock } from './data-dir-lock.js'
import { lostPlace, type Place, readPlace } from './data-dir-place.js'
import { EventLog } from './event-log.js'
import { toTombstoneJson } from './stored-files.js'
import { loadUserFiles } from './user-files-load.js'

export interface FileStoreOptions {
  dataDir: string
  logger?: Logger
  /** Files read between two yields to the event loop while loading (default 2000). */
  loadChunk?: number
  /** Milliseconds since the epoch, for tombstones (Date.now by default). */
  now?: () => number
  /** How often the data directory and the lock are checked while open (default 1000 ms). */
  watchIntervalMs?: number
  /** Events older than this many days are pruned, whole segments at a time (default 30). */
  eventsRetentionDays?: number
}

/**
 * The default store: one JSON file per user in `DATA_DIR/users/`, written atomically and durably,
 * and an index in memory loaded at open. A delete first writes the user's tombstone (id and time)
 * to `DATA_DIR/tombstones/`, then unlinks the user file. It owns the data directory through a
 * lock, and watches that the directory it loaded is still the one at its path.
 */
export class FileStore extends IndexedStore {
  readonly dataDir: string
  readonly usersDir: string
  readonly quarantineDir: string
  readonly tombstonesDir: string
  readonly eventsDir: string
  readonly capabilities: StoreCapabilities
  readonly #eventLog: EventLog
  readonly #retentionMs: number
  readonly #clock: () => number
  #pruning: Promise<void> | undefined
  readonly #lock: DataDirLock
  readonly #logger: Logger
  readonly #chunk: number
  readonly #watchIntervalMs: number
  #dir: DurableDirectory | undefined
  #graves: DurableDirectory | undefined
  #place: Place | undefined
  #watch: NodeJS.Timeout | undefined

  constructor(options: FileStoreOptions) {
    super({ now: options.now })
    this.dataDir = path.resolve(options.dataDir)
    this.usersDir = path.join(this.dataDir, 'users')
    this.quarantineDir = path.join(this.dataDir, 'quarantine')
    this.tombstonesDir = path.join(this.dataDir, 'tombstones')
    this.eventsDir = path.join(this.dataDir, 'events')
    this.capabilities = Object.freeze({
      dataDir: this.dataDir,
      durable: true,
      shared: false,
      turnsReadOnly: true,
    })
    this.#clock = options.now ?? Date.now
    this.#logger = options.logger ?? silentLogger
    this.#eventLog = new EventLog(this.eventsDir, {
      now: this.#clock,
      logger: this.#logger,
      quarantineDir: this.quarantineDir,
    })
    this.#retentionMs = (options.eventsRetentionDays ?? 30) * 86_400_000
    this.#lock = new DataDirLock(this.dataDir)
    this.#chunk = options.loadChunk ?? 2000
    this.#watchIntervalMs = options.watchIntervalMs ?? 1000
  }

  /**
   * Takes the data directory's lock, or throws LockError. Call it before listening and before
   * anything else is written to the directory; open() calls it too.
   */
  override lock(): void {
    // Synchronous on purpose: the lock is taken before the server listens.
    if (this.#lock.held) return
    makeDurableDirectory(this.dataDir)
    this.#lock.acquire()
  }

  async open(): Promise<void> {
    this.lock()
    makeDurableDirectory(this.usersDir)
    makeDurableDirectory(this.tombstonesDir)
    this.#dir = await DurableDirectory.open(this.usersDir)
    this.#graves = await DurableDirectory.open(this.tombstonesDir)
    this.#place = await readPlace(this.usersDir)
    await loadUserFiles({
      usersDir: this.usersDir,
      tombstonesDir: this.tombstonesDir,
      quarantineDir: this.quarantineDir,
      users: () => this.#directory(),
      graves: () => this.#tombstones(),
      index: this.index,
      tombstones: this.tombstones,
      logger: this.#logger,
      chunk: this.#chunk,
    })
    makeDurableDirectory(this.eventsDir)
    await this.#loadEvents()
    this.#watch = setInterval(() => {
      void this.#checkPlace()
      this.#pruning ??= this.pruneEvents()
        .catch((error: unknown) => {
          this.#logger.warn('could not prune events', { error: String(error) })
        })
        .finally(() => {
          this.#pruning = undefined
        })
    }, this.#watchIntervalMs)
    this.#watch.unref()
  }

  async close(): Promise<void> {
    clearInterval(this.#watch)
    this.#watch = undefined
    await this.#pruning
    await this.#eventLog.close()
    const dirs = [this.#dir, this.#graves]
    this.#dir = undefined
    this.#graves = undefined
    await Promise.all(dirs.map((dir) => dir?.close()))
    // Never fails: a read-only or vanished directory must not turn a clean stop into an error.
    const held = this.#lock.held
    if (held && !this.#lock.release()) {
      this.#logger.warn('could not remove the lock file', { file: this.#lock.file })
    }
  }

  protected override logEvent(event: ChangeEvent): Promise<void> {
    return this.#eventLog.append(event)
  }

  protected override voidEvent(event: ChangeEvent): Promise<void> {
    return this.#eventLog.void(event.id)
  }

  /** Drops whole segments older than the retention; requests go on meanwhile. */
  async pruneEvents(): Promise<void> {
    await this.#eventLog.prune(
      new Date(this.#clock() - this.#retentionMs).toISOString(),
      (through) => {
        this.events.dropThrough(through)
      },
    )
  }

  /**
   * Loads the feed's index (its bodies stay on disk) and reconciles it with the users loaded: an
   * event is written (durably) before its change, so after a crash an event may describe a change
   * that never reached users/ or tombstones/. Such an event is voided, durably, so that no later
   * start takes it back.
   */
  async #loadEvents(): Promise<void> {
    const index = new EventIndex()
    const loaded = this.#eventLog.load(index, (event) => this.#made(event))
    for (const id of loaded.ghosts) await this.#eventLog.void(id)
    this.events.load(index, this.#eventLog, loaded.nextId, loaded.prunedThrough)
    this.#logger.info('events loaded', {
      events: loaded.events,
      voided: loaded.ghosts.length,
      damaged: loaded.damaged,
    })
  }

  /** Whether the change an event describes is in what was loaded. */
  #made(event: EventHead): boolean {
    const user = this.index.get(event.userId)
    const gone = this.tombstones.has(event.userId)
    return event.type === 'user.deleted'
      ? gone
      : gone || (user !== undefined && user.user.version >= event.version)
  }

  protected persist(record: UserRecord, logged: Promise<void>): Promise<void> {
    return this.#directory().writeFile(`${record.user.id}.json`, record.json, logged)
  }

  /**
   * The tombstone is made durable before the user file goes, so that no crash can forget a
   * deletion whose user file is gone. Until the unlink, the user file wins at load: a failed
   * tombstone write, or a failed unlink, leaves the user as it was.
   */
  protected async bury(tombstone: Tombstone): Promise<void> {
    const name = `${tombstone.id}.json`
    try {
      await this.#tombstones().writeFile(name, toTombstoneJson(tombstone))
    } catch (error) {
      if (error instanceof WriteError && error.applied)
        throw new WriteError(error.step, error.cause, false)
      throw error
    }
    await this.#directory().removeFile(name)
  }

  #directory(): DurableDirectory {
    if (this.#dir === undefined) throw internalFault('the file store is not open')
    return this.#dir
  }

  #tombstones(): DurableDirectory {
    if (this.#graves === undefined) throw internalFault('the file store is not open')
    return this.#graves
  }

  /**
   * Turns the store read-only when the directory it loaded is no longer at its path (removed,
   * replaced, remounted) or its lock is gone: another process may own the path by now.
   */
  async #checkPlace(): Promise<void> {
    const loaded = this.#place
    if (loaded === undefined || this.health().state === 'read_only') return
    const problem = await lostPlace(this.usersDir, loaded, this.#lock)
    if (problem === undefined) return
    this.turnReadOnly(problem)
    this.#logger.error('the store turned read-only', { reason: problem, dataDir: this.dataDir })
  }
}
