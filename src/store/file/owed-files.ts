import type { DurableDirectory } from './atomic-write.js'
import type { OwedContent, OwedWriter } from './owed-writer.js'

/** A file owed by a committed change: its content, and its modification time when it needs one. */
export interface OwedFile {
  readonly json: string
  /** Seconds since the epoch (a key file's expiry). */
  readonly mtime?: number
}

/** A user file owed by a committed change: the user and the event that made it durable. */
export interface Owed extends OwedFile {
  readonly userId: string
  readonly eventId: number
}

/**
 * Files of one directory not yet written: their changes' events are durable in the log (a
 * restart's replay would write them), and the checkpoint writes them in one batch before it
 * moves past those events. Imported users' files are owed so (a later change of the same user
 * takes its owed file first, file-steps.ts, so that an older content never lands over a newer
 * one), and kept keys' files.
 */
export class OwedFiles<T extends OwedFile = Owed> {
  readonly #writer: OwedWriter
  #waiting = new Map<string, T>()
  #writing = new Map<string, T>()
  /** Resolves once the batch being written is over, written or not. */
  #written: Promise<void> | undefined

  constructor(writer: OwedWriter) {
    this.#writer = writer
  }

  /** Files owed, waiting or being written. */
  get size(): number {
    return this.#waiting.size + this.#writing.size
  }

  add(name: string, owed: T): void {
    this.#waiting.set(name, owed)
  }

  /** The batch writing this file, while it runs. */
  writing(name: string): Promise<void> | undefined {
    return this.#writing.has(name) ? this.#written : undefined
  }

  /** Takes a waiting file off the batch: its taker writes it. */
  take(name: string): T | undefined {
    const owed = this.#waiting.get(name)
    if (owed !== undefined) this.#waiting.delete(name)
    return owed
  }

  /**
   * Writes every waiting file durably (fsynced, then renamed into place: the directory is the
   * caller's to fsync) on the writer's threads, and gives the batch written; on a failure they
   * all wait again (a later batch writes them again: each write replaces the file whole).
   */
  async writeAll(dir: DurableDirectory): Promise<ReadonlyMap<string, T>> {
    if (this.#waiting.size === 0) return this.#waiting
    const batch = this.#waiting
    this.#waiting = new Map()
    this.#writing = batch
    let over = (): void => undefined
    this.#written = new Promise((resolve) => {
      over = resolve
    })
    try {
      // Every write has ended when this settles: none may land after a taker's newer file.
      await this.#writer.write(
        dir.path,
        Array.from(batch, ([name, { json, mtime }]): OwedContent => [name, json, mtime]),
      )
      return batch
    } catch (error) {
      for (const [name, owed] of batch) if (!this.#waiting.has(name)) this.#waiting.set(name, owed)
      throw error
    } finally {
      this.#writing = new Map()
      this.#written = undefined
      over()
    }
  }
}

/** A kept key's file owed to the checkpoint; `written` once it is in place, fsynced. */
export interface OwedKey extends OwedFile {
  readonly written: () => void
}

/**
 * Kept keys' files owed to the checkpoint (their changes' events are durable), which writes them
 * in a batch before it moves past those events; past `many` waiting, `onMany` starts one at once.
 */
export class OwedKeyFiles {
  readonly #files: OwedFiles<OwedKey>
  readonly #many: number
  readonly #onMany: () => void

  constructor(writer: OwedWriter, many: number, onMany: () => void) {
    this.#files = new OwedFiles(writer)
    this.#many = many
    this.#onMany = onMany
  }

  /** Files owed, waiting or being written. */
  get size(): number {
    return this.#files.size
  }

  /** The key's file, with its expiry as its modification time; `written` once it is in place. */
  add(name: string, json: string, expiresAt: number, written: () => void): void {
    this.#files.add(name, { json, mtime: expiresAt / 1000, written })
    if (this.#files.size >= this.#many) this.#onMany()
  }

  /** Takes an owed file off for its taker to write now, after a batch writing it is over. */
  async take(name: string): Promise<OwedKey | undefined> {
    for (let batch = this.#files.writing(name); batch !== undefined; ) {
      await batch
      batch = this.#files.writing(name)
    }
    return this.#files.take(name)
  }

  /** Writes every waiting file (OwedFiles.writeAll), tells each it is written, and says how many. */
  async writeAll(dir: DurableDirectory): Promise<number> {
    const batch = await this.#files.writeAll(dir)
    for (const owed of batch.values()) owed.written()
    return batch.size
  }
}
