import path from 'node:path'

import { internalFault } from '../../domain/errors.js'
import { type ChangeEvent, eventIdNumber } from '../../domain/event.js'
import type { KeptKey } from '../../domain/kept-key.js'
import type { Tombstone } from '../../domain/tombstone.js'
import type { UserRecord } from '../../domain/user.js'
import { type Logger, silentLogger } from '../../log/logger.js'
import { SETTINGS } from '../../settings.js'
import type { Durability, IndexedState, LogEvent } from '../durability.js'
import type { StoreCapabilities } from '../store.js'
import { retentionCutoff, upkeepClock } from '../upkeep-clock.js'
import type { WebhookStore } from '../webhook-store.js'
import { type DurableWriteObserver, UNOBSERVED } from '../write-timing.js'
import { makeDurableDirectory } from './atomic-write.js'
import { Checkpoint } from './checkpoint.js'
import { DataDirLock } from './data-dir-lock.js'
import { checkPlace, type Place, readPlace } from './data-dir-place.js'
import { loadData } from './data-load.js'
import { EventLog } from './event-log.js'
import type { FileDurabilityOptions } from './file-durability-options.js'
import {
  type BackgroundFault,
  backgroundFault,
  checkpointFailed,
  checkpointSucceeded,
  keySweepFailed,
  logUnwritten,
} from './file-faults.js'
import { buryUser, type FileSteps, persistUser } from './file-steps.js'
import { KeyFiles } from './key-files.js'
import { keptKeyJson } from './key-format.js'
import { saveSnapshot } from './snapshot-save.js'
import { closeStoreDirs, openStoreDirs, type StoreDirs } from './store-dirs.js'
import { WebhookFiles } from './webhook-files.js'

const CAPABILITIES = { durable: true, shared: false, turnsReadOnly: true } as const

/**
 * The file store's durability: one JSON file per user in `DATA_DIR/users/`, loaded into the index
 * at open. A delete writes the user's tombstone (id and time) to `DATA_DIR/tombstones/`, then
 * unlinks the user file. The change feed's log is the write-ahead log (docs/operations.md): a
 * change is durable once its event is, its files are renamed into place unsynced, and a
 * checkpoint makes them durable later (Checkpoint); at open, the log's tail is replayed first
 * (replayTail). It owns the data directory through a lock, and watches that the directory it
 * loaded is still the one at its path.
 */
export class FileDurability implements Durability {
  readonly dataDir: string
  readonly usersDir: string
  readonly quarantineDir: string
  readonly tombstonesDir: string
  readonly eventsDir: string
  readonly capabilities: StoreCapabilities
  readonly keys: KeyFiles
  readonly webhooks: WebhookStore
  readonly #webhookFiles: WebhookFiles
  readonly #eventLog: EventLog
  readonly #clock: () => number
  readonly #upkeepClock: () => number
  #pruning: Promise<void> | undefined
  readonly #lock: DataDirLock
  readonly #logger: Logger
  readonly #options: FileDurabilityOptions
  /** The service's maintenance: a backup copies the directory, and the upkeep deletes nothing. */
  #upkeepPaused = (): boolean => false
  #dirs: StoreDirs | undefined
  #checkpoint: Checkpoint | undefined
  #place: Place | undefined
  #watch: NodeJS.Timeout | undefined
  readonly #timings: DurableWriteObserver
  #state: IndexedState | undefined
  /** Where a failed write in the background is logged, and what turns the store read-only. */
  readonly #fault: BackgroundFault

  constructor(options: FileDurabilityOptions) {
    this.#options = options
    this.dataDir = path.resolve(options.dataDir)
    this.usersDir = path.join(this.dataDir, 'users')
    this.quarantineDir = path.join(this.dataDir, 'quarantine')
    this.tombstonesDir = path.join(this.dataDir, 'tombstones')
    this.eventsDir = path.join(this.dataDir, 'events')
    this.capabilities = Object.freeze({ dataDir: this.dataDir, ...CAPABILITIES })
    this.#clock = options.now ?? Date.now
    this.#upkeepClock = upkeepClock(options.now)
    this.#logger = options.logger ?? silentLogger
    this.#timings = options.timings ?? UNOBSERVED
    const turnReadOnly = (why: string): void => this.#held().turnReadOnly(why)
    this.#fault = backgroundFault(this.#logger, this.dataDir, turnReadOnly)
    this.#eventLog = new EventLog(this.eventsDir, {
      now: this.#clock,
      logger: this.#logger,
      quarantineDir: this.quarantineDir,
      timings: this.#timings,
    })
    this.#lock = new DataDirLock(this.dataDir)
    this.keys = new KeyFiles({
      now: this.#upkeepClock,
      logger: this.#logger,
      sweepMs: options.keySweepMs,
      cacheBytes: options.keyCacheBytes,
      filterBits: options.keyFilterBits,
      sweepFailed: (error) => keySweepFailed(this.#fault, error),
      paused: () => this.#upkeepPaused() || this.#state?.health().state === 'read_only',
    })
    const webhooksDir = path.join(this.dataDir, 'webhooks')
    this.#webhookFiles = new WebhookFiles(webhooksDir, this.#logger, this.#timings, () =>
      this.#held(),
    )
    this.webhooks = this.#webhookFiles.store
  }

  attach(state: IndexedState): void {
    this.#state = state
  }

  pauseUpkeep(paused: () => boolean): void {
    this.#upkeepPaused = paused
  }

  /**
   * Takes the data directory's lock, or throws LockError. Call it before listening and before
   * anything else is written to the directory; open() calls it too.
   */
  lock(): void {
    // Synchronous on purpose: the lock is taken before the server listens.
    if (this.#lock.held) return
    makeDurableDirectory(this.dataDir)
    this.#lock.acquire()
  }

  async open(): Promise<void> {
    const state = this.#held()
    this.lock()
    makeDurableDirectory(this.eventsDir)
    const dirs = await openStoreDirs(this.dataDir, this.#timings)
    this.#dirs = dirs
    this.#place = await readPlace(this.usersDir)
    const replayed = await loadData({
      dirs,
      eventsDir: this.eventsDir,
      eventLog: this.#eventLog,
      state,
      now: this.#clock(),
      usersDir: this.usersDir,
      tombstonesDir: this.tombstonesDir,
      quarantineDir: this.quarantineDir,
      users: () => this.#opened().users,
      graves: () => this.#opened().graves,
      logger: this.#logger,
      timings: this.#timings,
      chunk: this.#options.loadChunk ?? 2000,
    })
    await this.#webhookFiles.open()
    this.#checkpoint = new Checkpoint({
      ...dirs,
      logged: () => this.#eventLog.highest,
      through: replayed.through,
      skipped: { last: this.#eventLog.highest, first: state.events.nextId },
      intervalMs: this.#options.checkpointMs ?? SETTINGS.checkpointMs.default,
      paused: () => state.health().state === 'read_only',
      failed: (error) => checkpointFailed(this.#fault, error),
      succeeded: () => checkpointSucceeded(this.#fault),
    })
    this.#checkpoint.start()
    this.keys.open(dirs.keys, this.eventsDir, () => this.#checkpoint, this.#eventLog.extent())
    this.#watch = setInterval(() => {
      void checkPlace({
        dir: this.usersDir,
        loaded: this.#place,
        lock: this.#lock,
        state,
        logger: this.#logger,
        dataDir: this.dataDir,
      })
      // Behind the last checkpoint only: forcing one here would make CHECKPOINT_MS past this
      // interval mean nothing. None in maintenance, while a backup copies the segments.
      if (!this.#upkeepPaused())
        this.#pruning ??= this.#prune()
          .catch((error: unknown) => {
            this.#logger.warn('could not prune events', { error: String(error) })
          })
          .finally(() => {
            this.#pruning = undefined
          })
    }, this.#options.watchIntervalMs ?? 1000)
    this.#watch.unref()
  }

  async close(): Promise<void> {
    clearInterval(this.#watch)
    this.#watch = undefined
    await this.#webhookFiles.close()
    this.#checkpoint?.stop()
    await this.#pruning
    await this.keys.close()
    // A clean stop leaves nothing to replay.
    const checkpoint = this.#checkpoint
    await checkpoint?.settle()
    await checkpoint?.close()
    this.#checkpoint = undefined
    await this.#eventLog.close()
    const dirs = this.#dirs
    this.#dirs = undefined
    if (dirs !== undefined && checkpoint !== undefined) await this.#saveSnapshot(dirs, checkpoint)
    await closeStoreDirs(dirs)
    // Never fails: a read-only or vanished directory must not turn a clean stop into an error.
    if (this.#lock.held && !this.#lock.release())
      this.#logger.warn('could not remove the lock file', { file: this.#lock.file })
  }

  /** The snapshot the next start reads, when memory is exactly what the files hold, durably. */
  async #saveSnapshot(dirs: StoreDirs, checkpoint: Checkpoint): Promise<void> {
    const state = this.#held()
    await saveSnapshot({
      root: dirs.root,
      usersDir: this.usersDir,
      tombstonesDir: this.tombstonesDir,
      logger: this.#logger,
      clean: () =>
        state.health().state !== 'read_only' &&
        checkpoint.idle &&
        checkpoint.through === this.#eventLog.highest,
      through: checkpoint.through,
      records: () => state.index.records(),
      tombstones: state.tombstones,
    })
  }

  /** The event, and its request's key with it (one append: both or neither). */
  async logEvent(event: ChangeEvent, kept?: KeptKey): Promise<void> {
    const id = eventIdNumber(event.id)
    this.#checkpoint?.begin(event.userId, id)
    // The key's text is made once: its log line and its journal line carry the same.
    const keyJson = kept === undefined ? undefined : keptKeyJson(kept)
    const copy = await this.#eventLog.append(event, keyJson)
    if (kept !== undefined && keyJson !== undefined) this.keys.logged(kept, id, keyJson, copy)
  }

  voidEvent(event: ChangeEvent): Promise<void> {
    return this.#eventLog.void(event.id)
  }

  /** Drops whole segments older than the retention; requests go on meanwhile. */
  async pruneEvents(): Promise<void> {
    // Segments past the checkpoint stay (a replay may need them): move it first.
    await this.#checkpoint?.settle()
    await this.#prune()
  }

  /** Drops whole segments older than the retention and behind the checkpoint. */
  async #prune(): Promise<void> {
    await this.#eventLog.prune(
      retentionCutoff(this.#upkeepClock(), this.#options.eventsRetentionDays),
      this.#checkpoint?.through ?? 0,
      (through) => this.#state?.events.dropThrough(through),
    )
  }

  /**
   * The user file renamed into place unsynced: its event in the log makes it durable. An
   * imported user's file (`later`) is left to the next checkpoint, which writes it in a batch.
   */
  persist(record: UserRecord, log: LogEvent | undefined, later = false): Promise<void> {
    // No event, nothing in the log to replay it from: durable by itself.
    if (log === undefined)
      return this.#opened().users.writeFile(`${record.user.id}.json`, record.json)
    return persistUser(this.#fileSteps(), record, log, later)
  }

  bury(tombstone: Tombstone, log: LogEvent): Promise<void> {
    return buryUser(this.#fileSteps(), tombstone, log)
  }

  #fileSteps(): FileSteps {
    const { users, graves } = this.#opened()
    return { users, graves, checkpoint: this.#checkpoint }
  }

  /** A committed change whose file step failed after its event was durable: the log keeps it. */
  unwritten(event: ChangeEvent, error: unknown): void {
    logUnwritten(this.#logger, this.dataDir, event, error)
  }

  /** What the store holds in memory: attached as the store is built. */
  #held(): IndexedState {
    if (this.#state === undefined) throw internalFault('the file store is not built')
    return this.#state
  }

  #opened(): StoreDirs {
    if (this.#dirs === undefined) throw internalFault('the file store is not open')
    return this.#dirs
  }
}
