import { unlink } from 'node:fs/promises'
import path from 'node:path'

import { internalFault, ServiceError } from '../../domain/errors.js'
import type { DeliveryAttempt, StoredWebhook } from '../../domain/webhook.js'
import type { Logger } from '../../log/logger.js'
import type { IndexedState } from '../durability.js'
import { MemoryWebhooks, type WebhookKeeping } from '../memory-webhooks.js'
import { PerKeyQueue } from '../per-key-queue.js'
import { storageUnavailable } from '../storage-unavailable.js'
import { WriteError } from '../write-error.js'
import type { DurableWriteObserver } from '../write-timing.js'
import { DurableDirectory, makeDurableDirectory } from './atomic-write.js'
import { toWebhookJson } from './stored-webhooks.js'
import { loadWebhookFiles, webhookFileNames } from './webhook-files-load.js'
import { DeliveryLogFiles } from './webhook-log-files.js'

/**
 * What the webhook files need of the store: its health (endpoint writes are refused while it is
 * read-only), and the switch a failed fsync turns (nothing the kernel holds is trusted then).
 */
export type WebhookFilesState = Pick<IndexedState, 'health' | 'turnReadOnly'>

/** How often the cursors moved by deliveries are saved. */
const FLUSH_MS = 1000

/**
 * The file store's webhooks (docs/operations.md), in `DATA_DIR/webhooks/`: per endpoint
 * `<id>.json` (the endpoint and its secrets), `<id>.cursor` and `<id>.log` (its delivery log, a
 * JSON line per attempt), every file of mode 0600. Endpoint files are written atomically and
 * durably before a change resolves; a new endpoint's cursor file first, so that an endpoint is
 * never found without one. Cursors moved by deliveries are saved every FLUSH_MS and at close,
 * never ahead of the acknowledgments that moved them (a restart may deliver again, never skip);
 * a client's move is durable before it resolves. The log is appended unsynced, at the same
 * flushes. All of it is loaded at open into `store`, which answers every read from memory.
 */
export class WebhookFiles implements WebhookKeeping {
  readonly store: MemoryWebhooks
  readonly #path: string
  readonly #logger: Logger
  readonly #timings: DurableWriteObserver
  readonly #state: () => WebhookFilesState
  #dir: DurableDirectory | undefined
  /** One file step at a time per endpoint: a cursor's writes land in the order they were made. */
  readonly #queues = new PerKeyQueue()
  readonly #running = new Set<Promise<unknown>>()
  /** Cursors moved by deliveries and not yet saved. */
  readonly #pending = new Map<string, string>()
  /** The endpoints whose files exist (a cursor noted for one deleted since is not saved). */
  readonly #known = new Set<string>()
  readonly #logs: DeliveryLogFiles
  #flushing: NodeJS.Timeout | undefined
  #flushFailed = false

  /** `dir` is `DATA_DIR/webhooks`; `state` is the store's, once it is built. */
  constructor(
    dir: string,
    logger: Logger,
    timings: DurableWriteObserver,
    state: () => WebhookFilesState,
  ) {
    this.#path = dir
    this.#logger = logger
    this.#timings = timings
    this.#state = state
    this.store = new MemoryWebhooks(this)
    this.#logs = new DeliveryLogFiles(
      logger,
      (id, task) => this.#step(id, false, task),
      (id) => this.#known.has(id),
    )
  }

  /** Makes the directory when it is missing and loads every endpoint it holds. */
  async open(): Promise<void> {
    makeDurableDirectory(this.#path)
    this.#dir = await DurableDirectory.open(this.#path, this.#timings)
    for (const loaded of await loadWebhookFiles(this.#path, this.#logger)) {
      const { id } = loaded.hook.endpoint
      this.store.restore(loaded.hook, loaded.cursor, loaded.log)
      this.#known.add(id)
      this.#logs.loaded(id, loaded.logLines, loaded.logTorn)
    }
    this.#flushing = setInterval(() => {
      this.#flush()
    }, FLUSH_MS)
    this.#flushing.unref()
  }

  /** Saves the cursors deliveries moved and waits for every file step under way. */
  async close(): Promise<void> {
    clearInterval(this.#flushing)
    this.#flushing = undefined
    this.#flush()
    while (this.#running.size > 0) await Promise.allSettled([...this.#running])
    const dir = this.#dir
    this.#dir = undefined
    await dir?.close()
  }

  saveEndpoint(hook: StoredWebhook, cursor: string | undefined): Promise<void> {
    const { id } = hook.endpoint
    const names = webhookFileNames(id)
    return this.#step(id, true, async (dir) => {
      if (cursor !== undefined) await dir.writeFile(names.cursor, `${cursor}\n`)
      await dir.writeFile(names.endpoint, toWebhookJson(hook))
      this.#known.add(id)
    })
  }

  removeEndpoint(id: string): Promise<void> {
    const names = webhookFileNames(id)
    return this.#step(id, true, async (dir) => {
      await dir.removeFile(names.endpoint)
      this.#known.delete(id)
      this.#pending.delete(id)
      this.#logs.forget(id)
      // Left behind by a crash, they are removed at the next open.
      await unlink(path.join(dir.path, names.cursor)).catch(() => undefined)
      await unlink(path.join(dir.path, names.log)).catch(() => undefined)
    })
  }

  saveCursor(id: string, after: string): Promise<void> {
    // A move a delivery made before is replaced by this one, which is saved now.
    this.#pending.delete(id)
    return this.#step(id, true, async (dir) => {
      await dir.writeFile(webhookFileNames(id).cursor, `${after}\n`)
    })
  }

  noteCursor(id: string, after: string): void {
    this.#pending.set(id, after)
  }

  /**
   * Queues the attempt's line for the next flush and resolves at once: the endpoint's next attempt
   * does not wait for the disk (where the thread pool would queue the write behind the user
   * writes' syncs).
   */
  appendAttempt(
    id: string,
    attempt: DeliveryAttempt,
    kept: () => readonly DeliveryAttempt[],
  ): Promise<void> {
    if (this.#known.has(id)) this.#logs.append(id, attempt, kept)
    return Promise.resolve()
  }

  /**
   * Writes every cursor noted since the last flush, and the delivery log lines queued since or not
   * written then; a failure is kept for the next one.
   */
  #flush(): void {
    this.#logs.flush()
    const noted = [...this.#pending]
    this.#pending.clear()
    for (const [id, after] of noted) {
      if (!this.#known.has(id)) continue
      this.#step(id, false, async (dir) => {
        if (!this.#known.has(id)) return
        await dir.writeFile(webhookFileNames(id).cursor, `${after}\n`)
        if (this.#flushFailed) this.#logger.info('webhook cursors are saved again')
        this.#flushFailed = false
      }).catch((error: unknown) => {
        if (!this.#pending.has(id)) this.#pending.set(id, after)
        if (!this.#flushFailed)
          this.#logger.warn('could not save a webhook cursor; the next flush tries again', {
            webhookId: id,
            code: (error as { cause?: { code?: unknown } }).cause?.code,
          })
        this.#flushFailed = true
      })
    }
  }

  /**
   * Runs a file step of an endpoint after its earlier ones; a refused one rejects with
   * storage_unavailable. `write`: an endpoint's change, refused at once while the store is
   * read-only.
   */
  #step(id: string, write: boolean, task: (dir: DurableDirectory) => Promise<void>): Promise<void> {
    const health = this.#state().health()
    if (write && health.state === 'read_only')
      return Promise.reject(storageUnavailable(undefined, health))
    const run = this.#queues.run(id, async () => {
      try {
        await task(this.#open())
      } catch (error) {
        throw this.#failed(error)
      }
    })
    this.#running.add(run)
    void run.then(
      () => this.#running.delete(run),
      () => this.#running.delete(run),
    )
    return run
  }

  #failed(error: unknown): ServiceError {
    if (error instanceof ServiceError) return error
    const fault = error instanceof WriteError ? error : new WriteError('write', error)
    if (fault.fsyncFailed) {
      this.#state().turnReadOnly(`a webhook file's fsync failed (${fault.code ?? 'no errno'})`)
      this.#logger.error('a webhook file could not be made durable: the store turned read-only', {
        step: fault.step,
        code: fault.code,
        dir: this.#path,
      })
    }
    return storageUnavailable(fault, this.#state().health())
  }

  #open(): DurableDirectory {
    if (this.#dir === undefined) throw internalFault('the file store is not open')
    return this.#dir
  }
}
