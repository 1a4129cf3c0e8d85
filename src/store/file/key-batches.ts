import type { KeptKey } from '../../domain/kept-key.js'
import { OwedWriter } from './owed-writer.js'

/** A key whose file is to be written, under its file's name, with the file's text (keyFileJson). */
export interface QueuedKey {
  readonly name: string
  readonly kept: KeptKey
  readonly json: string
}

export interface KeyBatchesOptions<T extends QueuedKey> {
  /** DATA_DIR/keys */
  readonly dir: string
  /** The batch's files are written and fsynced (their directory is not). */
  readonly written: (batch: readonly T[]) => void
  /** The batch's files could not all be written. */
  readonly failed: (batch: readonly T[], error: unknown) => void
}

/**
 * Writes key files durably, with the keys queued meanwhile in one batch on a thread of its own
 * (OwedWriter): the event loop pays a message per batch, not five trips to libuv's pool per key
 * and three more for the checkpoint's fsync. Each file is given its key's expiry as its
 * modification time (key-sweep.ts). The keys queued while one batch is written make the next.
 */
export class KeyBatches<T extends QueuedKey> {
  readonly #options: KeyBatchesOptions<T>
  readonly #writer = new OwedWriter(1)
  #queue: T[] = []
  /** The batches being written, until the queue is empty. */
  #flushing: Promise<void> | undefined
  /** The batch being written. */
  #batch: Promise<void> | undefined

  constructor(options: KeyBatchesOptions<T>) {
    this.#options = options
  }

  add(key: T): void {
    this.#queue.push(key)
    this.#flushing ??= this.#flush()
  }

  /**
   * Waits for the batch being written when `limit` keys or more wait for their files (at once
   * otherwise): a writer that would add to a queue the writes do not keep up with waits instead,
   * so that the keys held in memory stay bounded however long the load lasts.
   */
  async room(limit: number): Promise<void> {
    if (this.#queue.length >= limit) await this.#batch
  }

  /** Waits for the queue to be written, then ends the writer's thread. */
  async close(): Promise<void> {
    await this.#flushing
    await this.#writer.close()
  }

  async #flush(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue
        this.#queue = []
        this.#batch = this.#write(batch)
        await this.#batch
      }
    } finally {
      this.#batch = undefined
      this.#flushing = undefined
    }
  }

  async #write(batch: readonly T[]): Promise<void> {
    try {
      await this.#writer.write(
        this.#options.dir,
        batch.map(({ name, kept, json }) => [name, json, kept.expiresAt / 1000]),
      )
    } catch (error) {
      this.#options.failed(batch, error)
      return
    }
    this.#options.written(batch)
  }
}
