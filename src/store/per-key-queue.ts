/**
 * Runs tasks one at a time per key (a user id): a write waits for the earlier writes to the same
 * user, and writes to other users go on meanwhile. A key's entry is dropped once its queue is empty.
 */
export class PerKeyQueue {
  readonly #tails = new Map<string, Promise<void>>()

  /** Runs `task` after every earlier task for `key` has settled, whether it failed or not. */
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve()
    const run = previous.then(task, task)
    const settled = run.then(
      () => undefined,
      () => undefined,
    )
    this.#tails.set(key, settled)
    void settled.then(() => {
      if (this.#tails.get(key) === settled) this.#tails.delete(key)
    })
    return run
  }
}
