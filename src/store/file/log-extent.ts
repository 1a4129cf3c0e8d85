import { journalCopy, type LogCopy } from './key-format.js'

/**
 * Where the event log ended when the store opened: each segment's bytes of whole lines. A kept
 * key kept with a change names where its copy is in the log (a journal line's `segment:offset`);
 * a copy past that end, or in a segment the log never had, means the key was stored without its
 * change (a data directory copied while the service wrote: keys/ from a later moment than
 * events/), and the key must not answer for a change that is not there. Only lines written
 * before this process appended to their journal are judged: its own followed their change.
 */
export class LogExtent {
  readonly #bytes: ReadonlyMap<string, number>
  /** The oldest segment: one named before it was removed by the feed's retention. */
  readonly #first: string | undefined
  /** Per journal, where this process's own appends begin. */
  readonly #appendsFrom = new Map<string, number>()

  constructor(segments: readonly { readonly name: string; readonly bytes: number }[]) {
    this.#bytes = new Map(segments.map(({ name, bytes }) => [name, bytes]))
    this.#first = segments[0]?.name
  }

  /**
   * Whether the copy lies in the log as it was loaded. A segment older than every one left was
   * pruned by retention while its keys were still kept: their changes were there, so they count.
   */
  holds(copy: LogCopy): boolean {
    const bytes = this.#bytes.get(copy.segment)
    if (bytes !== undefined) return copy.offset < bytes
    // Names are 16 hex digits: their text order is their number order.
    return this.#first !== undefined && copy.segment < this.#first
  }

  /**
   * This process's appends to `journal` begin at `offset` (its size then): its lines from there on
   * followed their change into the log. Told before the first append to each journal.
   */
  appending(journal: string, offset: number): void {
    if (!this.#appendsFrom.has(journal)) this.#appendsFrom.set(journal, offset)
  }

  /**
   * Whether the line of `journal` at `offset`, written before this process appended to it, names
   * a copy of its key that the log as loaded does not hold: a key stored without its change.
   */
  drops(journal: string, line: Buffer, offset: number): boolean {
    if (offset >= (this.#appendsFrom.get(journal) ?? Number.POSITIVE_INFINITY)) return false
    const copy = journalCopy(line)
    return copy !== undefined && !this.holds(copy)
  }
}
