/**
 * Keeps the input order of an import's lines where it matters: a line waits for every earlier
 * line that names one of its keys (its user's id, its email) to be over, and lines with no key in
 * common run at once. A line takes its place behind the earlier ones when it is started, so lines
 * started in input order are stored in input order wherever their keys meet.
 */
export class LineOrder {
  /** Per key, the end of the latest line that named it. */
  readonly #tails = new Map<string, Promise<void>>()

  run<T>(keys: readonly string[], task: () => Promise<T>): Promise<T> {
    const earlier = keys.flatMap((key) => this.#tails.get(key) ?? [])
    const run = Promise.all(earlier).then(task)
    const over = run.then(
      () => undefined,
      () => undefined,
    )
    for (const key of keys) this.#tails.set(key, over)
    void over.then(() => {
      for (const key of keys) if (this.#tails.get(key) === over) this.#tails.delete(key)
    })
    return run
  }

  /** Keys some line still waits on or runs under (none once every line is over). */
  get size(): number {
    return this.#tails.size
  }
}
