import type { DurableDirectory } from './atomic-write.js'
import { OwedWriter } from './owed-writer.js'

/** A user file owed by a committed change: its content and the event that made it durable. */
export interface Owed {
  readonly userId: string
  readonly json: string
  readonly eventId: number
}

/**
 * The user files of imported users, not yet written: their events are durable in the log (a
 * restart's replay would write them), and the checkpoint writes them in one batch before it
 * fsyncs them and moves past their events. A later change of the same user takes its owed file
 * first (file-steps.ts), so that an older content never lands over a newer one.
 */
export class OwedFiles {
  readonly #writer = new OwedWriter()
  #waiting = new Map<string, Owed>()
  #writing = new Map<string, Owed>()
  /** Resolves once the batch being written is over, written or not. */
  #written: Promise<void> | undefined

  /** Files owed, waiting or being written. */
  get size(): number {
    return this.#waiting.size + this.#writing.size
  }

  add(name: string, owed: Owed): void {
    this.#waiting.set(name, owed)
  }

  /** The batch writing this file, while it runs. */
  writing(name: string): Promise<void> | undefined {
    return this.#writing.has(name) ? this.#written : undefined
  }

  /** Takes a waiting file off the batch: its taker writes it. */
  take(name: string): Owed | undefined {
    const owed = this.#waiting.get(name)
    if (owed !== undefined) this.#waiting.delete(name)
    return owed
  }

  /**
   * Writes every waiting file durably (fsynced, then renamed into place: the directory is the
   * caller's to fsync) on the writer's thread, and says how many; on a failure they all wait
   * again (a later batch writes them again: each write replaces the file whole).
   */
  async writeAll(dir: DurableDirectory): Promise<number> {
    if (this.#waiting.size === 0) return 0
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
        Array.from(batch, ([name, owed]) => [name, owed.json] as const),
      )
      return batch.size
    } catch (error) {
      for (const [name, owed] of batch) this.#waiting.set(name, owed)
      throw error
    } finally {
      this.#writing = new Map()
      this.#written = undefined
      over()
    }
  }

  /** Ends the writer's thread (after the last checkpoint). */
  close(): Promise<void> {
    return this.#writer.close()
  }
}
