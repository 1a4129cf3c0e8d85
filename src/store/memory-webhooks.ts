import { internalFault } from '../domain/errors.js'
import type { DeliveryAttempt, StoredWebhook } from '../domain/webhook.js'
import { PerKeyQueue } from './per-key-queue.js'
import {
  byAge,
  checkStorableCursor,
  checkStorableWebhook,
  duplicateWebhookId,
  webhookLimitReached,
  webhookNotFound,
} from './webhook-input.js'
import { KEPT_ATTEMPTS, type WebhookStore } from './webhook-store.js'

/**
 * How the endpoints a MemoryWebhooks holds are kept beyond memory: nowhere (the memory store), or
 * the file store's files. Memory changes only once a step that must be durable has resolved.
 */
export interface WebhookKeeping {
  /** Makes a new endpoint (with its first cursor) or a changed one durable. */
  saveEndpoint(hook: StoredWebhook, cursor: string | undefined): Promise<void>
  /** Durably removes an endpoint, then its cursor and its log. */
  removeEndpoint(id: string): Promise<void>
  /** A client moved the cursor: durable before it resolves. */
  saveCursor(id: string, after: string): Promise<void>
  /** Delivery moved the cursor after an acknowledgment: it may be saved later. */
  noteCursor(id: string, after: string): void
  /**
   * Adds an attempt to the endpoint's log; `kept` gives what the log keeps now, oldest first (for
   * a keeping that rewrites its log shorter now and then).
   */
  appendAttempt(
    id: string,
    attempt: DeliveryAttempt,
    kept: () => readonly DeliveryAttempt[],
  ): Promise<void>
}

const DONE: Promise<void> = Promise.resolve()

/** Keeps nothing: the memory store's webhooks live as long as the process. */
export const NOT_KEPT: WebhookKeeping = {
  saveEndpoint: () => DONE,
  removeEndpoint: () => DONE,
  saveCursor: () => DONE,
  noteCursor: () => undefined,
  appendAttempt: () => DONE,
}

/** Attempts past KEPT_ATTEMPTS are dropped in batches of this many, not one by one. */
const TRIM_SLACK = 100

/** The queue key that makes creates run one at a time, so that two cannot pass the limit. */
const CREATES = 'creates'

/**
 * Webhook endpoints, their cursors and their delivery logs in memory, for a store that one
 * process opens: every lease is granted at once. What must outlive the process is handed to the
 * keeping it is built with first (the file store's files); the memory store keeps nothing.
 */
export class MemoryWebhooks implements WebhookStore {
  readonly #hooks = new Map<string, StoredWebhook>()
  readonly #cursors = new Map<string, string>()
  readonly #logs = new Map<string, DeliveryAttempt[]>()
  readonly #queues = new PerKeyQueue()
  readonly #keeping: WebhookKeeping

  constructor(keeping: WebhookKeeping = NOT_KEPT) {
    this.#keeping = keeping
  }

  /** How many endpoints it holds. */
  get size(): number {
    return this.#hooks.size
  }

  /** Puts back what the keeping loaded at open: an endpoint, its cursor and its log. */
  restore(hook: StoredWebhook, cursor: string, log: readonly DeliveryAttempt[]): void {
    const { id } = hook.endpoint
    this.#hooks.set(id, hook)
    this.#cursors.set(id, cursor)
    this.#logs.set(id, log.slice(-KEPT_ATTEMPTS))
  }

  list(): Promise<StoredWebhook[]> {
    return Promise.resolve([...this.#hooks.values()].sort(byAge))
  }

  get(id: string): Promise<StoredWebhook | undefined> {
    return Promise.resolve(this.#hooks.get(id))
  }

  create(hook: StoredWebhook, cursor: string, max: number): Promise<void> {
    const { id } = hook.endpoint
    try {
      checkStorableWebhook(hook, id)
      checkStorableCursor(cursor)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#queues.run(CREATES, async () => {
      if (this.#hooks.has(id)) throw duplicateWebhookId(id)
      if (this.#hooks.size >= max) throw webhookLimitReached(max)
      await this.#keeping.saveEndpoint(hook, cursor)
      this.#hooks.set(id, hook)
      this.#cursors.set(id, cursor)
      this.#logs.set(id, [])
    })
  }

  update(
    id: string,
    change: (current: StoredWebhook) => StoredWebhook | undefined,
  ): Promise<StoredWebhook> {
    return this.#queues.run(id, async () => {
      const current = this.#require(id)
      const next = change(current)
      if (next === undefined) return current
      checkStorableWebhook(next, id)
      await this.#keeping.saveEndpoint(next, undefined)
      // A delete that ran meanwhile wins: it is queued on the same id, so it cannot have.
      this.#hooks.set(id, next)
      return next
    })
  }

  delete(id: string, check?: (current: StoredWebhook) => void): Promise<void> {
    return this.#queues.run(id, async () => {
      const current = this.#require(id)
      check?.(current)
      await this.#keeping.removeEndpoint(id)
      this.#hooks.delete(id)
      this.#cursors.delete(id)
      this.#logs.delete(id)
    })
  }

  cursor(id: string): Promise<string | undefined> {
    return Promise.resolve(this.#cursors.get(id))
  }

  async setCursor(id: string, after: string): Promise<void> {
    checkStorableCursor(after)
    this.#require(id)
    const before = this.#cursors.get(id) ?? after
    // Moved at once, so that an advance from the old cursor that ends meanwhile is refused.
    this.#cursors.set(id, after)
    try {
      await this.#keeping.saveCursor(id, after)
    } catch (error) {
      // Refused: the cursor stays where it was (to be saved lazily, as a delivery's move is).
      if (this.#cursors.get(id) === after && this.#hooks.has(id)) {
        this.#cursors.set(id, before)
        this.#keeping.noteCursor(id, before)
      }
      throw error
    }
  }

  advanceCursor(id: string, from: string, to: string): Promise<boolean> {
    try {
      checkStorableCursor(to)
    } catch (error) {
      return Promise.reject(error)
    }
    const enabled = this.#hooks.get(id)?.endpoint.enabled === true
    if (!enabled || this.#cursors.get(id) !== from) return Promise.resolve(false)
    this.#cursors.set(id, to)
    this.#keeping.noteCursor(id, to)
    return Promise.resolve(true)
  }

  async logAttempt(id: string, attempt: DeliveryAttempt): Promise<void> {
    const log = this.#logs.get(id)
    // An endpoint deleted while its attempt was in flight: the log went with it.
    if (log === undefined) return
    log.push(attempt)
    if (log.length > KEPT_ATTEMPTS + TRIM_SLACK) log.splice(0, log.length - KEPT_ATTEMPTS)
    await this.#keeping.appendAttempt(id, attempt, () => log.slice(-KEPT_ATTEMPTS))
  }

  attempts(id: string, limit: number, before?: string): Promise<DeliveryAttempt[]> {
    const log = this.#logs.get(id) ?? []
    const found: DeliveryAttempt[] = []
    const oldest = Math.max(0, log.length - KEPT_ATTEMPTS)
    for (let i = log.length - 1; i >= oldest && found.length < limit; i -= 1) {
      const attempt = log[i]
      if (attempt === undefined) throw internalFault('a hole in a delivery log')
      if (before === undefined || attempt.id < before) found.push(attempt)
    }
    return Promise.resolve(found)
  }

  lease(id: string): Promise<boolean> {
    return Promise.resolve(this.#hooks.has(id))
  }

  releaseLease(): Promise<void> {
    return DONE
  }

  #require(id: string): StoredWebhook {
    const hook = this.#hooks.get(id)
    if (hook === undefined) throw webhookNotFound()
    return hook
  }
}
