/**
 * A least-recently-used cache bounded by what its entries weigh (an estimate of their bytes, given
 * by the caller), not by their count: a process may hold a few MiB of kept answers, however many
 * there are and however big each is. An entry heavier than an eighth of the budget is not kept.
 */
export class ByteLru<V> {
  readonly #budget: number
  /** Oldest first: a Map keeps insertion order, and a hit moves its entry to the end. */
  readonly #entries = new Map<string, { readonly value: V; readonly bytes: number }>()
  #bytes = 0

  constructor(budgetBytes: number) {
    this.#budget = budgetBytes
  }

  /** What the entries held weigh, in bytes; never more than the budget. */
  get bytes(): number {
    return this.#bytes
  }

  get size(): number {
    return this.#entries.size
  }

  get(name: string): V | undefined {
    const entry = this.#entries.get(name)
    if (entry === undefined) return undefined
    this.#entries.delete(name)
    this.#entries.set(name, entry)
    return entry.value
  }

  set(name: string, value: V, bytes: number): void {
    this.delete(name)
    if (bytes > this.#budget / 8) return
    this.#entries.set(name, { value, bytes })
    this.#bytes += bytes
    for (const [old, entry] of this.#entries) {
      if (this.#bytes <= this.#budget) break
      this.#entries.delete(old)
      this.#bytes -= entry.bytes
    }
  }

  delete(name: string): void {
    const entry = this.#entries.get(name)
    if (entry === undefined) return
    this.#entries.delete(name)
    this.#bytes -= entry.bytes
  }
}
