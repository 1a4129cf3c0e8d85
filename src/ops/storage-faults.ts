import type { HttpError } from '../http/problem.js'
import type { Logger } from '../log/logger.js'

/** Where a storage fault was met: the request, its operation, and the import line if any. */
export interface FaultPlace {
  readonly requestId: string
  /** The operationId of the route (`createUser`, `importUsers`…). */
  readonly operation: string
  readonly line?: number | undefined
}

export interface StorageFaultLogOptions {
  logger: Logger
  /** Whether the store reports itself healthy now; without it, a successful write is enough. */
  storeHealthy?: (() => boolean) | undefined
}

/**
 * Logs the faults of the service's own storage (docs/operations.md): the first fault of each episode at `error`,
 * with its cause (errno and syscall, or the database's SQLSTATE), the operation and the requestId;
 * the later ones of the same episode at `debug` only, so that an outage met by every request
 * writes one error line, not one per request.
 *
 * An episode begins with the first storage fault an answer meets, and ends with the first write
 * that succeeds after it while the store reports itself healthy (`ok`): for the file store, a
 * write that reached the disk again (a read-only store, after a failed fsync, stays in its episode
 * until a restart); for PostgreSQL, a write committed again. The end is logged at `info` with the
 * number of faults the episode met.
 */
export class StorageFaultLog {
  readonly #logger: Logger
  readonly #storeHealthy: () => boolean
  /** Faults met in the episode under way; 0: none is. */
  #faults = 0

  constructor(options: StorageFaultLogOptions) {
    this.#logger = options.logger
    this.#storeHealthy = options.storeHealthy ?? (() => true)
  }

  /** True while an episode is under way. */
  get inEpisode(): boolean {
    return this.#faults > 0
  }

  /** A `storage_unavailable` answer: logged at `error` when it opens an episode. */
  fault(error: HttpError, place: FaultPlace): void {
    this.#faults += 1
    const fields = { ...placeFields(place), ...describeCause(error.cause) }
    if (this.#faults === 1) this.#logger.error('storage fault', fields)
    else this.#logger.debug('storage fault again', { ...fields, faults: this.#faults })
  }

  /** A write succeeded: the episode, if one is under way and the store says it is healthy, ends. */
  wrote(): void {
    if (this.#faults === 0 || !this.#storeHealthy()) return
    this.#logger.info('storage works again', { faults: this.#faults })
    this.#faults = 0
  }
}

function placeFields(place: FaultPlace): Record<string, unknown> {
  return {
    requestId: place.requestId,
    operation: place.operation,
    ...(place.line === undefined ? {} : { line: place.line }),
  }
}

/** SQLSTATE: five digits or capitals (class 08, 53, 57P01…); errno codes are E-words instead. */
const SQLSTATE = /^[0-9A-Z]{5}$/
const ERRNO = /^E[A-Z0-9]+$/

/**
 * The codes of a fault's cause chain: the durable write's step, the errno, syscall and path of a
 * system call, a SQLSTATE. Messages are left out (a database's message may quote the client's
 * data), except the innermost one when the chain holds no code at all (a driver's "Connection
 * terminated unexpectedly"), cut to 200 characters.
 */
export function describeCause(cause: unknown): Record<string, string> {
  const found: Record<string, string> = {}
  let next = cause
  let innermost: unknown
  for (let depth = 0; depth < 5 && typeof next === 'object' && next !== null; depth += 1) {
    innermost = next
    const fields = next as Record<string, unknown>
    const { code, syscall, step, path } = fields
    if (typeof step === 'string') found['step'] ??= step
    if (typeof syscall === 'string') found['syscall'] ??= syscall
    if (typeof path === 'string') found['path'] ??= path
    if (typeof code === 'string') {
      const isErrno =
        typeof syscall === 'string' || typeof fields['errno'] === 'number' || ERRNO.test(code)
      if (isErrno) found['errno'] ??= code
      else if (SQLSTATE.test(code)) found['sqlstate'] ??= code
    }
    next = fields['cause']
  }
  if (
    found['errno'] === undefined &&
    found['sqlstate'] === undefined &&
    innermost instanceof Error
  ) {
    found['error'] = innermost.message.slice(0, 200)
  }
  return found
}
