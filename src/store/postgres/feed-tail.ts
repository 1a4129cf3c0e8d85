import { type ChangeEvent, cursorValue, eventJson, formatEventId } from '../../domain/event.js'
import { EVENT_PAGE_MAX_BYTES, type EventPage, type EventQuery } from '../event-feed.js'

/** The most events, and bytes of their JSON, the tail keeps: older ones are read from the database. */
const MAX_EVENTS = 10_000
const MAX_BYTES = 8 * 1024 * 1024

interface Kept {
  readonly event: ChangeEvent
  readonly id: bigint
  readonly bytes: number
}

/**
 * The newest events of the feed as one process read them, in memory: every event with an id in
 * (`from`, `head`], none missing (each batch was read in one statement up to that statement's
 * head). Live streams take their pages from it, so that N streams cost the database one read per
 * commit instead of N. A page it cannot answer whole (a cursor before `from` or past `head`) is
 * undefined: the caller reads the database.
 */
export class FeedTail {
  #kept: Kept[] = []
  #bytes = 0
  #from: bigint
  #head: bigint

  constructor(head: bigint) {
    this.#from = head
    this.#head = head
  }

  get head(): bigint {
    return this.#head
  }

  /** Events read after `head`, up to the statement's head `through`, in id order. */
  extend(events: readonly ChangeEvent[], through: bigint): void {
    for (const event of events) {
      const bytes = Buffer.byteLength(eventJson(event))
      this.#kept.push({ event, id: cursorValue(event.id), bytes })
      this.#bytes += bytes
    }
    if (through > this.#head) this.#head = through
    let drop = 0
    let dropped = 0
    while (
      drop < this.#kept.length &&
      (this.#kept.length - drop > MAX_EVENTS || this.#bytes - dropped > MAX_BYTES)
    ) {
      dropped += this.#kept[drop]?.bytes ?? 0
      drop += 1
    }
    if (drop === 0) return
    this.#from = this.#kept[drop - 1]?.id ?? this.#from
    this.#kept = this.#kept.slice(drop)
    this.#bytes -= dropped
  }

  /** The page readEventPage would give for `query`, or undefined when it is not all here. */
  page(query: EventQuery): EventPage | undefined {
    if (query.after === undefined) return undefined
    const after = cursorValue(query.after)
    if (after < this.#from || after > this.#head) return undefined
    const maxBytes = query.maxBytes ?? EVENT_PAGE_MAX_BYTES
    const items: ChangeEvent[] = []
    let bytes = 0
    for (let i = this.#firstAfter(after); i < this.#kept.length; i += 1) {
      const kept = this.#kept[i]
      if (kept === undefined) break
      const { event } = kept
      if (query.userId !== undefined && event.userId !== query.userId) continue
      if (query.types !== undefined && !query.types.includes(event.type)) continue
      const last = items.at(-1)
      if (last !== undefined && bytes + kept.bytes > maxBytes) {
        // As readEventPage: filtered, just before the match left out; unfiltered, after the last.
        const filtered = query.userId !== undefined || query.types !== undefined
        return { items, nextCursor: filtered ? formatEventId(kept.id - 1n) : last.id }
      }
      items.push(event)
      bytes += kept.bytes
      if (items.length === query.limit) return { items, nextCursor: event.id }
    }
    return { items, nextCursor: formatEventId(this.#head) }
  }

  /** The index of the first kept event after `after` (binary search: ids increase). */
  #firstAfter(after: bigint): number {
    let low = 0
    let high = this.#kept.length
    while (low < high) {
      const mid = (low + high) >>> 1
      if ((this.#kept[mid]?.id ?? 0n) <= after) low = mid + 1
      else high = mid
    }
    return low
  }
}
