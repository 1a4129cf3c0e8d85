import type { ChangeEvent } from '../domain/event.js'
import type { EventJournal } from './feed/journal.js'
import { WriteError } from './file/atomic-write.js'
import { storageUnavailable } from './storage-unavailable.js'
import type { StoreHealth } from './store.js'

const HEALTHY: StoreHealth = Object.freeze({ state: 'ok' })

/** The event of a change that has none: nothing to wait for. */
const LOGGED: Promise<void> = Promise.resolve()

/** How a store makes a change's event durable, or voids one whose change was not made. */
export interface EventDurability {
  logEvent(event: ChangeEvent): Promise<void>
  voidEvent(event: ChangeEvent): Promise<void>
}

/**
 * What a failed write means for an indexed store: it runs each durable step with its event, applies
 * the change to memory when the disk shows it, and keeps the store's health (degraded after a
 * refused write, read-only after a failed fsync or a lost event).
 */
export class ChangeCommit {
  readonly #events: EventJournal
  readonly #durability: EventDurability
  #health: StoreHealth = HEALTHY

  constructor(events: EventJournal, durability: EventDurability) {
    this.#events = events
    this.#durability = durability
  }

  get health(): StoreHealth {
    return this.#health
  }

  /** Refuses every write from now on, until a restart (see IndexedStore's turnReadOnly). */
  turnReadOnly(reason: string): void {
    this.#health = { state: 'read_only', reason }
  }

  /** Throws storage_unavailable once the store is read-only. */
  requireWritable(): void {
    if (this.#health.state === 'read_only') throw storageUnavailable(undefined, this.#health)
  }

  /**
   * Runs a durable step and applies it to memory when the disk shows it, whether or not it failed.
   * Its event, if any, is durable before the step changes anything on disk (the step waits for
   * `logged`; a temp file may be written and synced meanwhile, so the two syncs overlap): after a
   * crash the only possible mismatch is an event whose change is missing, which the file store
   * drops at start. An event whose change failed here is voided; the feed shows an event once its
   * change is in memory.
   */
  async run(
    step: (logged: Promise<void>) => Promise<void>,
    apply: () => void,
    event?: ChangeEvent,
  ): Promise<void> {
    const logged = event === undefined ? LOGGED : this.#logged(event)
    // A step that fails before it waits for the event leaves the rejection to us: never unhandled.
    logged.catch(() => undefined)
    try {
      await step(logged)
      await logged
    } catch (error) {
      const applied = error instanceof WriteError && error.applied
      if (event !== undefined && applied) this.#events.commit(event)
      else if (event !== undefined) await this.#voided(event)
      if (!(error instanceof WriteError)) throw error
      if (error.applied) apply()
      this.#noteFault(error)
      throw storageUnavailable(error, this.#health)
    }
    apply()
    if (event !== undefined) this.#events.commit(event)
    if (this.#health.state === 'degraded') this.#health = HEALTHY
  }

  /** The event made durable; a failure never counts as the change applied. */
  async #logged(event: ChangeEvent): Promise<void> {
    try {
      await this.#durability.logEvent(event)
    } catch (error) {
      if (error instanceof WriteError && error.applied)
        throw new WriteError(error.step, error.cause, false)
      throw error
    }
  }

  /**
   * Voids an event whose change was not made. When even that fails, the store takes no more
   * writes: at the next start the event, whose change is not on disk, is dropped.
   */
  async #voided(event: ChangeEvent): Promise<void> {
    this.#events.void(event)
    try {
      await this.#durability.voidEvent(event)
    } catch {
      this.turnReadOnly('an event whose change failed could not be voided')
    }
  }

  #noteFault(error: WriteError): void {
    if (this.#health.state === 'read_only') return
    if (error.fsyncFailed || error.code === 'EIO') {
      this.turnReadOnly(`a write failed at ${error.step} (${error.code ?? 'no errno'})`)
    } else {
      // A full or read-only disk: writes may work again once space is freed or the mount fixed.
      this.#health = {
        state: 'degraded',
        reason: `a write failed at ${error.step} (${error.code ?? 'no errno'})`,
      }
    }
  }
}
