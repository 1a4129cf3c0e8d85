/**
 * How a delivery loop waits between steps: for a time (a retry's delay, a poll), or for new events
 * (with a longest wait, for the events of other processes a feed may not announce), and woken
 * early by a change of its endpoint or by stopping. A new event announced while the loop was busy
 * is not lost: the next wait for events ends at once.
 */
export class LoopPause {
  /** How long a wait lasts at most. */
  readonly #longestMs: number
  #eventsPending = false
  #waiting: { readonly onEvents: boolean; readonly wake: () => void } | undefined

  constructor(longestMs: number) {
    this.#longestMs = longestMs
  }

  /** The loop is about to read the feed: what was announced so far it will see. */
  reading(): void {
    this.#eventsPending = false
  }

  /**
   * Waits `ms`, or, when undefined, until new events are announced; never longer than the longest
   * wait: a loop that waits hours to retry looks again meanwhile, and sees a cursor moved on
   * another replica, or a feed pruned past it, within that.
   */
  wait(ms: number | undefined): Promise<void> {
    const onEvents = ms === undefined
    if (onEvents && this.#eventsPending) return Promise.resolve()
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer)
        this.#waiting = undefined
        resolve()
      }
      const timer = setTimeout(wake, Math.min(ms ?? Infinity, this.#longestMs))
      this.#waiting = { onEvents, wake }
    })
  }

  /** New events may be readable: ends a wait for them. */
  newEvents(): void {
    this.#eventsPending = true
    if (this.#waiting?.onEvents === true) this.#waiting.wake()
  }

  /** Ends any wait (a change of the endpoint, stopping). */
  wake(): void {
    this.#waiting?.wake()
  }
}
