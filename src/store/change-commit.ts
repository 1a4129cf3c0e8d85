import type { ChangeEvent, EventDraft } from '../domain/event.js'
import type { KeptKey } from '../domain/kept-key.js'
import type { EventDurability, LogEvent } from './durability.js'
import type { EventJournal } from './feed/journal.js'
import { storageUnavailable } from './storage-unavailable.js'
import type { StoreHealth } from './store.js'
import { WriteError } from './write-error.js'

const HEALTHY: StoreHealth = Object.freeze({ state: 'ok' })

/** The event of a change that has none: nothing to wait for. */
const LOGGED: Promise<void> = Promise.resolve()

/** Where a change's event stands in the log. */
type Logging = 'not-started' | 'running' | 'durable' | 'failed'

/**
 * Commits one change of an indexed store: runs its durable step with its event, applies the
 * change to memory when it is committed, and keeps the store's health (degraded after a refused
 * write, read-only after a failed fsync or a lost event).
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

  /** Refuses every write from now on, until a restart (see IndexedState's turnReadOnly). */
  turnReadOnly(reason: string): void {
    this.#health = { state: 'read_only', reason }
  }

  /** Throws storage_unavailable once the store is read-only. */
  requireWritable(): void {
    if (this.#health.state === 'read_only') throw storageUnavailable(undefined, this.#health)
  }

  /**
   * Runs a durable step. A change with an event is committed once that event is durable: the step
   * first does what the disk may refuse (a temp file written), then calls `log`, then changes what
   * the directory shows. So a full disk refuses a change before its event is in the log (a definite
   * 503: nothing appears later), and a step that fails after `log` resolved does not undo the
   * committed change: it is answered as done and applied to memory, and the log brings its file
   * back (the store keeps it past its checkpoint). When the log's own sync fails, nobody knows
   * whether the record reached the disk: that 503 says its outcome is unknown. The event (from
   * `draft`) gets its id when it is logged; the feed shows it once its change is in memory, and
   * an event whose change was not committed is voided. `kept`, the request's `Idempotency-Key`,
   * goes to the log with the event: it is kept exactly when the change is.
   */
  async run(
    step: (log: LogEvent) => Promise<void>,
    apply: () => void,
    draft?: EventDraft,
    kept?: KeptKey,
  ): Promise<void> {
    const logging: { state: Logging; failure?: unknown } = { state: 'not-started' }
    let logged: Promise<void> | undefined
    let event: ChangeEvent | undefined
    const log: LogEvent = () => {
      if (draft === undefined) return LOGGED
      if (logged !== undefined) return logged
      logging.state = 'running'
      // The id is taken as the event goes to the log, so that the log is in id order whichever
      // change's preparation ended first.
      event = this.#events.assign(draft)
      logged = this.#durability.logEvent(event, kept).then(
        () => {
          logging.state = 'durable'
        },
        (error: unknown) => {
          logging.state = 'failed'
          logging.failure = error
          throw error
        },
      )
      return logged
    }
    try {
      await step(log)
      // A step with nothing to prepare (the memory store) leaves the event to be logged here.
      await log()
    } catch (error) {
      await logged?.catch(() => undefined)
      if (event !== undefined && logging.state === 'durable') {
        this.#committedAnyway(error, apply, event)
        return
      }
      const mayBeLogged = isUnknownOutcome(logging.failure)
      if (event !== undefined) await this.#voided(event, mayBeLogged)
      if (!(error instanceof WriteError)) throw error
      // A file renamed into place whose directory sync failed is shown, yet may not survive a
      // power cut: not a definite refusal either.
      const renamed = error.applied && draft === undefined
      if (renamed) apply()
      this.#noteFault(error)
      const outcome = mayBeLogged || renamed ? 'unknown' : undefined
      throw storageUnavailable(error, this.#health, outcome)
    }
    apply()
    if (event !== undefined) this.#events.commit(event)
    if (this.#health.state === 'degraded') this.#health = HEALTHY
  }

  /**
   * A step that failed after its event was durable: the change is committed all the same (a
   * restart would replay it), so memory and the feed show it and the answer says it was made.
   * The fault still counts against the store's health, as any refused write does.
   */
  #committedAnyway(error: unknown, apply: () => void, event: ChangeEvent): void {
    apply()
    this.#events.commit(event)
    this.#durability.unwritten(event, error)
    if (!(error instanceof WriteError)) throw error
    this.#noteFault(error)
  }

  /**
   * Voids an event whose change was not committed. An event that never reached the log, or whose
   * append was cut back off it, needs nothing on disk. One whose log sync failed may be on disk:
   * a void record is written, and when even that fails the store takes no more writes (at the
   * next start the event, whose change is not in the files, is dropped or replayed: unknown).
   */
  async #voided(event: ChangeEvent, mayBeLogged: boolean): Promise<void> {
    this.#events.void(event)
    if (!mayBeLogged) return
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

/**
 * Whether a failed append may still have put its record on disk: its fdatasync failed (or the
 * cut-back of a failed write did), so the kernel may or may not have written it. Every other
 * failure of the log (it could not open, write or name a segment) leaves no record behind.
 */
function isUnknownOutcome(error: unknown): boolean {
  return error instanceof WriteError && error.step === 'file-sync'
}
