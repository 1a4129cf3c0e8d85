import type { Logger } from '../log/logger.js'
import { removeGeneratedSecret } from './first-start.js'

/** The signals that stop the service: SIGTERM, Ctrl-C, a closed terminal or a reload. */
export const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP']

/**
 * The stop signals of a start, until the running service takes them over. Until it listens, a
 * start has no request to finish, and a database that does not answer can hold it for long: the
 * first signal ends it at once (`stopped before listening`), removing the first-start secret it
 * wrote, whose token it never printed; `end` then gives back what the start holds and exits 0.
 * Without a listener the signal would kill the process, with its lock and that secret left behind.
 */
export class StartSignals {
  #secret: string | undefined
  #stopped = false
  readonly #listener = (signal: NodeJS.Signals): void => {
    if (this.#stopped) return
    this.#stopped = true
    this.#logger.info('stopped before listening', { signal })
    removeGeneratedSecret(this.#secret)
    this.#end()
  }
  readonly #logger: Logger
  readonly #end: () => void

  constructor(logger: Logger, end: () => void) {
    this.#logger = logger
    this.#end = end
    for (const signal of STOP_SIGNALS) process.on(signal, this.#listener)
  }

  /** Whether a signal ended the start: it must go no further. */
  get stopped(): boolean {
    return this.#stopped
  }

  /** The first-start secret's file, told before it is written. */
  writing(file: string): void {
    this.#secret = file
  }

  /**
   * Call once the running service's own listeners are on, not before: when a signal's last
   * listener goes, Node stops catching it and drops one caught but not yet handed out (it came
   * while the start ran without yielding), and the process would run on as if never told.
   */
  handedOver(): void {
    for (const signal of STOP_SIGNALS) process.off(signal, this.#listener)
  }
}
