import { describeError, type Logger } from '../log/logger.js'

/**
 * What one endpoint's loop logs while its steps fail (a database or a disk that refuses): the
 * first failure of a run of them at `warn`, the later ones at `debug`, and the first step that
 * works again at `info`, so that an outage writes two lines per endpoint, not one per poll.
 */
export class LoopTrouble {
  readonly #logger: Logger
  readonly #endpointId: string
  /** Failed steps since the last one that worked. */
  #failures = 0

  constructor(logger: Logger, endpointId: string) {
    this.#logger = logger
    this.#endpointId = endpointId
  }

  failed(error: unknown): void {
    this.#failures += 1
    const fields = { endpointId: this.#endpointId, ...describeError(error) }
    if (this.#failures === 1) this.#logger.warn('webhook delivery stopped for a while', fields)
    else
      this.#logger.debug('webhook delivery still stopped', { ...fields, failures: this.#failures })
  }

  worked(): void {
    if (this.#failures === 0) return
    const fields = { endpointId: this.#endpointId, failures: this.#failures }
    this.#logger.info('webhook delivery works again', fields)
    this.#failures = 0
  }
}
