import { internalFault } from '../../domain/errors.js'
import { isExpired, type KeptKey } from '../../domain/kept-key.js'
import type { Logger } from '../../log/logger.js'
import { ByteLru } from '../byte-lru.js'
import { type KeptKeys, type KeyHold, weighKeptKey } from '../kept-keys.js'
import { NameFilter } from '../name-filter.js'
import { throwUnreadable } from '../storage-unavailable.js'
import { WriteError } from '../write-error.js'
import type { DurableDirectory } from './atomic-write.js'
import type { CheckpointDir } from './checkpoint.js'
import { keptKeyJson, keyDigest, type LogCopy } from './key-format.js'
import { KeyJournal } from './key-journal.js'
import type { LogExtent } from './log-extent.js'

const HELD: Promise<KeyHold> = Promise.resolve('held')
const DONE: Promise<void> = Promise.resolve()
const KEYS_DROPPED = 'dropped kept idempotency keys whose change is not in the event log'

/** What the kept keys need of the checkpoint (Checkpoint). */
export interface KeyCheckpoint {
  touched(dir: CheckpointDir, name?: string): void
  holdEvent(eventId: number): void
  releaseEvent(eventId: number): void
}

export interface KeyFilesOptions {
  readonly now: () => number
  readonly logger: Logger
  /** How often expired keys are deleted (default 30 s). */
  readonly sweepMs?: number | undefined
  /** The key filter's size, as log2 of its bits (NameFilter; for tests of its false positives). */
  readonly filterBits?: number | undefined
  /** What the cache of kept keys may weigh (default 4 MiB). */
  readonly cacheBytes?: number | undefined
  /** Told when a sweep could not delete expired keys (file-faults.ts, keySweepFailed). */
  readonly sweepFailed: (error: unknown) => void
  /** While true, sweeps delete and blank nothing (a store turned read-only writes nothing more). */
  readonly paused: () => boolean
}

/** A key whose event is durable and whose journal line is not written yet (or could not be). */
interface Pinned {
  /** keyDigest */
  readonly name: string
  readonly kept: KeptKey
  /** The key's JSON (keptKeyJson), as the log line carries it. */
  readonly json: string
  readonly eventId: number
  /** Where its log line is (blanked once it has expired). */
  readonly copy: LogCopy | undefined
  writing: boolean
}

/**
 * The file store's kept `Idempotency-Key`s (docs/operations.md), named by the SHA-256 of their
 * subject and key, appended to the journals of `DATA_DIR/keys` (KeyJournal). A key kept with a
 * change is in the change's append to the log (EventLog) and durable with it; its journal line is
 * appended after, unsynced, in a batch with the keys logged meanwhile, and the checkpoint does not
 * pass its event until the line is written (and fsyncs the journal before it moves on), so that
 * the replay at the next start appends it otherwise. Until its line is there, the key is found in
 * memory (pinned). Memory holds only those, a cache bounded in bytes and a filter of fixed size
 * (NameFilter) that tells a key surely never kept, so that a new key (most requests') is not
 * looked for on disk; the filter is built from the journals at open, and again when a sweep has
 * deleted expired ones.
 */
export class KeyFiles implements KeptKeys {
  readonly #now: () => number
  readonly #logger: Logger
  readonly #sweepMs: number
  readonly #sweepFailed: (error: unknown) => void
  readonly #paused: () => boolean
  readonly #cache: ByteLru<KeptKey>
  readonly #pinned = new Map<string, Pinned>()
  /** Names being appended durably by keepAlone. */
  readonly #alone = new Set<string>()
  /** Keys logged, waiting for the next append. */
  #queued: Pinned[] = []
  #appending: Promise<void> | undefined
  /** Every key in a journal or on its way to one; undefined until a sweep has read them. */
  #filter: NameFilter | undefined
  /** The filter a sweep is building, told of every key kept meanwhile too. */
  #building: NameFilter | undefined
  readonly #filterBits: number | undefined
  #journal: KeyJournal | undefined
  #checkpoint: () => KeyCheckpoint | undefined = () => undefined
  #timer: NodeJS.Timeout | undefined
  #sweeping: Promise<void> | undefined
  /** The reading of the journals' names into a new filter, while one runs. */
  #reading: Promise<unknown> | undefined

  constructor(options: KeyFilesOptions) {
    this.#now = options.now
    this.#logger = options.logger
    this.#sweepMs = options.sweepMs ?? 30_000
    this.#sweepFailed = options.sweepFailed
    this.#paused = options.paused
    this.#cache = new ByteLru(options.cacheBytes ?? 4 * 1024 * 1024)
    this.#filterBits = options.filterBits
  }

  /** Whether a sweep has read the journals, so that a key absent from the filter is not looked for. */
  get filtering(): boolean {
    return this.#filter !== undefined
  }

  /** What the cache holds now, in bytes (never more than its budget). */
  get cachedBytes(): number {
    return this.#cache.bytes
  }

  /**
   * Starts keeping keys in `files` (after the replay), and the sweep, which also blanks expired
   * keys' lines in the log's segments in `eventsDir`; `extent` is the log as loaded (LogExtent).
   */
  open(
    files: DurableDirectory,
    eventsDir: string,
    checkpoint: () => KeyCheckpoint | undefined,
    extent?: LogExtent,
  ): void {
    this.#journal = new KeyJournal(files, eventsDir, extent)
    this.#checkpoint = checkpoint
    this.#timer ??= setInterval(() => {
      this.#sweepingNow()
    }, this.#sweepMs)
    this.#timer.unref()
    // At once: the filter is built by a sweep, and keys expired while stopped are due.
    this.#sweepingNow()
  }

  /** Stops the sweep and waits for the journal lines being written. */
  async close(): Promise<void> {
    clearInterval(this.#timer)
    this.#timer = undefined
    await this.#sweeping
    while (this.#appending !== undefined) await this.#appending
    this.#journal = undefined
  }

  async find(subject: string, key: string): Promise<KeptKey | undefined> {
    const name = keyDigest(subject, key)
    let kept = this.#pinned.get(name)?.kept ?? this.#cache.get(name)
    if (kept === undefined) {
      // Right after open, the first sweep is reading the journals: wait for it, not read them all.
      if (this.#filter === undefined) await (this.#reading ?? this.#sweeping)
      if (this.#filter?.mightHold(name) !== false) kept = await this.#onDisk(name)
    }
    if (kept === undefined || isExpired(kept, this.#now())) return undefined
    return kept
  }

  hold(): Promise<KeyHold> {
    // Only one process opens a data directory (its lock): holds are the process's own.
    return HELD
  }

  release(): Promise<void> {
    return DONE
  }

  /** Appends the key's line durably (journal fsynced, and keys/ when it is new); a failure is a WriteError. */
  async keepAlone(kept: KeptKey): Promise<void> {
    const name = keyDigest(kept.subject, kept.key)
    this.#alone.add(name)
    this.#filtered(name)
    try {
      await this.#journalOpen().append([{ name, kept, json: keptKeyJson(kept) }], true)
    } finally {
      this.#alone.delete(name)
    }
    this.#cache.set(name, kept, weighKeptKey(kept))
  }

  /**
   * The key's line and its event's are durable (the change is committed): the key is found from
   * now on, and its journal line is appended in the background, the checkpoint held behind the
   * event until it is.
   */
  logged(kept: KeptKey, eventId: number, json: string, copy?: LogCopy): void {
    const name = keyDigest(kept.subject, kept.key)
    const pin: Pinned = { name, kept, json, eventId, copy, writing: false }
    this.#pinned.set(name, pin)
    this.#filtered(name)
    this.#checkpoint()?.holdEvent(eventId)
    this.#cache.set(name, kept, weighKeptKey(kept))
    this.#queue(pin)
  }

  #sweepingNow(): void {
    this.#sweeping ??= this.#sweepOnce().finally(() => {
      this.#sweeping = undefined
    })
  }

  async #sweepOnce(): Promise<void> {
    // Keys whose line could not be written get another try.
    for (const pin of this.#pinned.values()) if (!pin.writing) this.#queue(pin)
    const now = this.#now()
    const journal = this.#journalOpen()
    if (this.#filter === undefined) {
      // First, for the keyed requests that wait for it; the deletions (blanking the log's copies
      // of many keys, after a long stop) may take a while. The journals they delete had passed
      // already: the filter holds none of their names.
      await this.#readFilter(journal, now)
      await this.#deleteExpired(journal, now)
      return
    }
    // The filter holds the names of the journals deleted: read again, without them.
    if ((await this.#deleteExpired(journal, now)) > 0) await this.#readFilter(journal, now)
  }

  /** Deletes the journals whose keys have all expired (none while paused); how many. */
  async #deleteExpired(journal: KeyJournal, now: number): Promise<number> {
    if (this.#paused()) return 0
    return journal.sweep(now).catch((error: unknown) => {
      this.#sweepFailed(error)
      return 0
    })
  }

  /** A new filter from the live journals' names and the keys on their way to one. */
  async #readFilter(journal: KeyJournal, now: number): Promise<void> {
    const building = new NameFilter(this.#filterBits)
    // Keys on their way to a journal may not be read: in the new filter from the start.
    for (const name of [...this.#pinned.keys(), ...this.#alone]) building.add(name)
    this.#building = building
    const read = journal.eachName(now, (name) => building.add(name))
    // find() waits for it, and must not fail with it.
    this.#reading = read.catch(() => undefined)
    try {
      const dropped = await read
      // Once: they are dropped in place, and the next readings do not find them.
      if (dropped > 0) this.#logger.warn(KEYS_DROPPED, { keys: dropped })
      this.#filter = building
    } catch (error) {
      this.#logger.warn('could not read the kept idempotency keys', { error: String(error) })
    } finally {
      this.#building = undefined
      this.#reading = undefined
    }
  }

  /** A key is now in a journal, or will be: the filters must never say it is not. */
  #filtered(name: string): void {
    this.#filter?.add(name)
    this.#building?.add(name)
  }

  #queue(pin: Pinned): void {
    pin.writing = true
    this.#queued.push(pin)
    this.#appending ??= this.#appendQueued().finally(() => {
      this.#appending = undefined
    })
  }

  /** Appends what was logged, a batch at a time, until nothing waits. */
  async #appendQueued(): Promise<void> {
    while (this.#queued.length > 0 && this.#journal !== undefined) {
      const batch = this.#queued
      this.#queued = []
      try {
        const journals = await this.#journal.append(batch)
        const checkpoint = this.#checkpoint()
        for (const journal of journals) checkpoint?.touched('keys', journal)
        for (const pin of batch) {
          if (this.#pinned.get(pin.name) === pin) this.#pinned.delete(pin.name)
          checkpoint?.releaseEvent(pin.eventId)
        }
      } catch (error) {
        // The log keeps them: found from memory until a sweep or the next start appends them.
        for (const pin of batch) pin.writing = false
        this.#logger.error(
          'kept idempotency keys could not be appended to their journal; the log keeps them',
          {
            keys: batch.length,
            event: batch[0]?.eventId,
            step: error instanceof WriteError ? error.step : 'write',
            code: error instanceof WriteError ? error.code : undefined,
            error: String(error),
          },
        )
      }
    }
  }

  /** A key not in memory, from the journals; a journal that cannot be read is storage_unavailable. */
  async #onDisk(name: string): Promise<KeptKey | undefined> {
    const kept = await this.#journal?.find(name, this.#now()).catch(throwUnreadable)
    if (kept !== undefined) this.#cache.set(name, kept, weighKeptKey(kept))
    return kept
  }

  #journalOpen(): KeyJournal {
    if (this.#journal === undefined) throw internalFault('the file store is not open')
    return this.#journal
  }
}
