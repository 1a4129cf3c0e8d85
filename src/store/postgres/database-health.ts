import type { Logger } from '../../log/logger.js'
import type { StoreHealth } from '../store.js'
import { pgFault } from './classify-error.js'

const HEALTHY: StoreHealth = Object.freeze({ state: 'ok' })
const UNANSWERED: StoreHealth = Object.freeze({
  state: 'degraded',
  reason: 'the database does not answer',
})
const READ_ONLY: StoreHealth = Object.freeze({
  state: 'degraded',
  reason: 'the database takes no writes (read-only, or a standby)',
})

/**
 * What the PostgreSQL store's answers say of its database, for /readyz: whether it answers, and
 * whether it takes writes. A database that answers but takes none (a standby after a failover,
 * default_transaction_read_only) serves reads, so a read does not clear that: a write that
 * commits does, or the probe seeing the database writable again.
 */
export class DatabaseHealth {
  readonly #logger: Logger
  #answers = true
  #readOnly = false

  constructor(logger: Logger) {
    this.#logger = logger
  }

  get state(): StoreHealth {
    if (!this.#answers) return UNANSWERED
    return this.#readOnly ? READ_ONLY : HEALTHY
  }

  /** A statement was answered. */
  answered(): void {
    if (this.#answers) return
    this.#logger.info('the database answers again')
    this.#answers = true
  }

  /** A statement met no answer, or a fault: readiness turns 503. */
  failed(error: unknown): void {
    // A warning, since the request that met the fault logs it at error (StorageFaultLog), once,
    // with its requestId; the probe alone logs nothing more.
    if (this.#answers) this.#logger.warn('the database does not answer', pgFault(error))
    this.#answers = false
  }

  /** A write was refused because the database takes none: it answers, and takes no writes. */
  refusedWrite(): void {
    this.answered()
    this.writable(false)
  }

  /** A write committed (true), or the probe read whether the database takes writes. */
  writable(writable: boolean): void {
    if (this.#readOnly === !writable) return
    this.#readOnly = !writable
    if (writable) this.#logger.info('the database takes writes again')
    else this.#logger.warn('the database takes no writes (read-only, or a standby)')
  }
}
