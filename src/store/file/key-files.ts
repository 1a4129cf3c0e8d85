import { readFile } from 'node:fs/promises'
import path from 'node:path'

import { internalFault } from '../../domain/errors.js'
import { isExpired, type KeptKey } from '../../domain/kept-key.js'
import type { Logger } from '../../log/logger.js'
import { ByteLru } from '../byte-lru.js'
import type { KeptKeys, KeyHold } from '../kept-keys.js'
import { NameFilter } from '../name-filter.js'
import { WriteError } from '../write-error.js'
import type { DurableDirectory } from './atomic-write.js'
import type { CheckpointDir } from './checkpoint.js'
import { hasCode } from './errno.js'
import { keyFileName, parseKeyFile } from './key-format.js'
import { sweepKeyFiles } from './key-sweep.js'
import { removeKeyTemps, writeKeyFile } from './key-write.js'

const HELD: Promise<KeyHold> = Promise.resolve('held')
const DONE: Promise<void> = Promise.resolve()
/** What an entry of the cache costs besides its strings (the object, the map's entry). */
const ENTRY_BYTES = 256

/** What the key files need of the checkpoint (Checkpoint). */
export interface KeyCheckpoint {
  touched(dir: CheckpointDir, name?: string): void
  holdEvent(eventId: number): void
  releaseEvent(eventId: number): void
}

export interface KeyFilesOptions {
  /** DATA_DIR/keys */
  readonly dir: string
  readonly now: () => number
  readonly logger: Logger
  /** How often expired keys are deleted (default 30 s). */
  readonly sweepMs?: number | undefined
  /** The key filter's size, as log2 of its bits (NameFilter; for tests of its false positives). */
  readonly filterBits?: number | undefined
  /** What the cache of kept keys may weigh (default 4 MiB). */
  readonly cacheBytes?: number | undefined
}

/** A key whose event is durable and whose file is not written yet (or could not be). */
interface Pinned {
  readonly kept: KeptKey
  /** The key file's text (keyFileJson), as the log line carries it. */
  readonly json: string
  readonly eventId: number
  writing: boolean
}

/**
 * The file store's kept `Idempotency-Key`s (docs/operations.md): one file per key in
 * `DATA_DIR/keys`, named by the SHA-256 of its subject and key. A key kept with a change is in the
 * change's append to the log (EventLog) and durable with it; its file is written after, unsynced,
 * and the checkpoint does not pass its event until the file is written (and fsyncs it before it
 * moves on), so that the replay at the next start writes it otherwise. Until its file is there,
 * the key is found in memory (pinned). Memory holds only those, a cache bounded in bytes and a
 * filter of fixed size (NameFilter) that tells a key surely never kept, so that a new key (most
 * requests') is not looked for on disk; a sweep deletes the files of expired keys and builds the
 * filter again from the files it leaves. Until the first sweep after open has listed them all,
 * every key not in memory is looked for.
 */
export class KeyFiles implements KeptKeys {
  readonly dir: string
  readonly #now: () => number
  readonly #logger: Logger
  readonly #sweepMs: number
  readonly #cache: ByteLru<KeptKey>
  readonly #pinned = new Map<string, Pinned>()
  /** Names being written durably by keepAlone. */
  readonly #alone = new Set<string>()
  readonly #writes = new Set<Promise<void>>()
  /** Every key with a file or on its way to one; undefined until a sweep has listed them. */
  #filter: NameFilter | undefined
  /** The filter a sweep is building, told of every key kept meanwhile too. */
  #building: NameFilter | undefined
  readonly #filterBits: number | undefined
  #files: DurableDirectory | undefined
  #checkpoint: () => KeyCheckpoint | undefined = () => undefined
  #timer: NodeJS.Timeout | undefined
  #sweeping: Promise<void> | undefined

  constructor(options: KeyFilesOptions) {
    this.dir = options.dir
    this.#now = options.now
    this.#logger = options.logger
    this.#sweepMs = options.sweepMs ?? 30_000
    this.#cache = new ByteLru(options.cacheBytes ?? 4 * 1024 * 1024)
    this.#filterBits = options.filterBits
  }

  /** Whether a sweep has listed the key files, so that a key absent from the filter is not looked for. */
  get filtering(): boolean {
    return this.#filter !== undefined
  }

  /** What the cache holds now, in bytes (never more than its budget). */
  get cachedBytes(): number {
    return this.#cache.bytes
  }

  /** Starts keeping keys in `files` (after the replay), and the sweep. */
  async open(files: DurableDirectory, checkpoint: () => KeyCheckpoint | undefined): Promise<void> {
    await removeKeyTemps(files)
    this.#files = files
    this.#checkpoint = checkpoint
    this.#timer ??= setInterval(() => {
      this.#sweepingNow()
    }, this.#sweepMs)
    this.#timer.unref()
    // At once: the filter is built by a sweep, and keys expired while stopped are due.
    this.#sweepingNow()
  }

  /** Stops the sweep and waits for the key files being written. */
  async close(): Promise<void> {
    clearInterval(this.#timer)
    this.#timer = undefined
    await this.#sweeping
    while (this.#writes.size > 0) await Promise.all(this.#writes)
    this.#files = undefined
  }

  async find(subject: string, key: string): Promise<KeptKey | undefined> {
    const name = keyFileName(subject, key)
    const kept =
      this.#pinned.get(name)?.kept ??
      this.#cache.get(name) ??
      (this.#filter?.mightHold(name) === false ? undefined : await this.#read(name))
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

  /** Writes the key's file durably (file and directory fsynced); a failure is a WriteError. */
  async keepAlone(kept: KeptKey): Promise<void> {
    const name = keyFileName(kept.subject, kept.key)
    this.#alone.add(name)
    this.#filtered(name)
    try {
      await writeKeyFile(this.#directory(), kept, true)
    } finally {
      this.#alone.delete(name)
    }
    this.#cache.set(name, kept, weigh(kept))
  }

  /**
   * The key's line and its event's are durable (the change is committed): the key is found from
   * now on, and its file is written in the background, the checkpoint held behind the event until
   * it is.
   */
  logged(kept: KeptKey, eventId: number, json: string): void {
    const name = keyFileName(kept.subject, kept.key)
    const pin: Pinned = { kept, json, eventId, writing: false }
    this.#pinned.set(name, pin)
    this.#filtered(name)
    this.#checkpoint()?.holdEvent(eventId)
    this.#cache.set(name, kept, weigh(kept))
    this.#write(name, pin)
  }

  #sweepingNow(): void {
    this.#sweeping ??= this.#sweepOnce().finally(() => {
      this.#sweeping = undefined
    })
  }

  async #sweepOnce(): Promise<void> {
    // Keys whose file could not be written get another try.
    for (const [name, pin] of this.#pinned) if (!pin.writing) this.#write(name, pin)
    // Keys on their way to a file may not be listed: they are in the new filter from the start.
    const building = new NameFilter(this.#filterBits)
    for (const name of this.#pinned.keys()) building.add(name)
    for (const name of this.#alone) building.add(name)
    this.#building = building
    try {
      const removed = await sweepKeyFiles({
        dir: this.dir,
        now: this.#now,
        busy: (name) => this.#pinned.has(name) || this.#alone.has(name),
        kept: (name) => building.add(name),
      })
      if (removed !== undefined) this.#filter = building
    } catch (error) {
      this.#logger.warn('could not sweep expired idempotency keys', { error: String(error) })
    } finally {
      this.#building = undefined
    }
  }

  /** A key now has a file, or will: the filters must never say it has none. */
  #filtered(name: string): void {
    this.#filter?.add(name)
    this.#building?.add(name)
  }

  #write(name: string, pin: Pinned): void {
    const files = this.#files
    if (files === undefined) return
    pin.writing = true
    const write = writeKeyFile(files, pin.kept, false, pin.json).then(
      () => {
        const checkpoint = this.#checkpoint()
        checkpoint?.touched('keys', name)
        if (this.#pinned.get(name) === pin) this.#pinned.delete(name)
        checkpoint?.releaseEvent(pin.eventId)
      },
      (error: unknown) => {
        // The log keeps it: found from memory until the next start's replay writes it.
        pin.writing = false
        this.#logger.error(
          'a kept idempotency key could not be written to its file; the log keeps it',
          {
            event: pin.eventId,
            step: error instanceof WriteError ? error.step : 'write',
            code: error instanceof WriteError ? error.code : undefined,
            error: String(error),
          },
        )
      },
    )
    this.#writes.add(write)
    void write.finally(() => this.#writes.delete(write))
  }

  async #read(name: string): Promise<KeptKey | undefined> {
    let text: string
    try {
      text = await readFile(path.join(this.dir, name), 'utf8')
    } catch (error) {
      if (hasCode(error, 'ENOENT')) return undefined
      throw error
    }
    const kept = parseKeyFile(text)
    if (kept === undefined || keyFileName(kept.subject, kept.key) !== name) {
      this.#logger.warn('a key file holds no kept key', { file: path.join(this.dir, name) })
      return undefined
    }
    this.#cache.set(name, kept, weigh(kept))
    return kept
  }

  #directory(): DurableDirectory {
    if (this.#files === undefined) throw internalFault('the file store is not open')
    return this.#files
  }
}

/** About what a kept key takes in memory: its strings (two bytes a character) and the objects. */
function weigh(kept: KeptKey): number {
  const { answer } = kept
  const chars =
    kept.subject.length +
    kept.key.length +
    kept.fingerprint.length +
    (answer.body?.length ?? 0) +
    (answer.contentType?.length ?? 0) +
    (answer.etag?.length ?? 0) +
    (answer.headers?.['location']?.length ?? 0)
  return 2 * chars + ENTRY_BYTES
}
