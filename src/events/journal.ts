import { HttpError } from '../errors.js'
import { formatEventId, parseEventId, type ChangeEvent, type EventDraft, type EventType } from './event.js'

/** One page request of the feed (§10). */
export interface EventQuery {
  /** An event id: only events after it. Undefined: from the oldest retained. */
  readonly after?: string | undefined
  readonly limit: number
  readonly types?: readonly EventType[] | undefined
  readonly userId?: string | undefined
  /**
   * The most bytes of event JSON (as `eventJson` writes it) a page may hold (§9: about 1 MiB per
   * response); a page whose next match would pass it ends early with a `nextCursor` before that
   * match. A page holds at least one match, whatever its size. Undefined: EVENT_PAGE_MAX_BYTES.
   */
  readonly maxBytes?: number | undefined
}

/** The default byte bound of one page of events (§9). */
export const EVENT_PAGE_MAX_BYTES = 1024 * 1024

export interface EventPage {
  readonly items: readonly ChangeEvent[]
  /** Where to resume: never empty, also when the page is. */
  readonly nextCursor: string
}

/** What the HTTP layer needs of a store's feed. */
export interface EventFeed {
  read(query: EventQuery): Promise<EventPage>
  /** Calls `wake` whenever new events may be readable; returns the unsubscribe. */
  subscribe(wake: () => void): () => void
  /** Events this process appended since it started (for /metrics). */
  readonly appended: number
}

export const ZERO_CURSOR = formatEventId(0)

/** A cursor before the oldest retained event: the consumer missed events (§10). */
export function cursorExpired(): HttpError {
  return new HttpError('cursor_expired', 'This cursor is older than the retained feed: events after it were pruned. Start again without after.')
}

/**
 * The feed in memory, in id order. Ids are handed out as changes start (so that the file log is
 * in id order), but an event becomes readable only once it and every lower id are settled
 * (committed or voided): a reader never sees id 6 before id 5, so a cursor never skips one.
 */
export class EventJournal implements EventFeed {
  #visible: ChangeEvent[] = []
  /** Ids handed out and not yet readable: undefined while in flight, null when voided. */
  readonly #settled = new Map<number, ChangeEvent | null | undefined>()
  readonly #wakers = new Set<() => void>()
  #nextId = 1
  /** Every id up to this one is settled (readable, voided or pruned). */
  #through = 0
  /** Every id up to this one was pruned. */
  #prunedThrough = 0
  appended = 0

  /** Loads what a durable log holds: `events` in id order, the next id, what was pruned. */
  load(events: readonly ChangeEvent[], nextId: number, prunedThrough: number): void {
    this.#visible = [...events]
    this.#nextId = nextId
    this.#through = nextId - 1
    this.#prunedThrough = prunedThrough
  }

  /** Gives the draft the next id; the caller must settle it with commit or void. */
  assign(draft: EventDraft): ChangeEvent {
    const id = this.#nextId
    this.#nextId += 1
    this.#settled.set(id, undefined)
    return { id: formatEventId(id), ...draft }
  }

  commit(event: ChangeEvent): void {
    this.appended += 1
    this.#settle(parseEventId(event.id), event)
  }

  void(event: ChangeEvent): void {
    this.#settle(parseEventId(event.id), null)
  }

  #settle(id: number, value: ChangeEvent | null): void {
    if (!this.#settled.has(id)) return
    this.#settled.set(id, value)
    let advanced = false
    for (;;) {
      const next = this.#settled.get(this.#through + 1)
      if (next === undefined) break
      this.#settled.delete(this.#through + 1)
      this.#through += 1
      if (next !== null) {
        this.#visible.push(next)
        advanced = true
      }
    }
    if (advanced) for (const wake of this.#wakers) wake()
  }

  /** Drops every event up to this id (the file log prunes whole segments); returns how many. */
  dropThrough(id: string | undefined): number {
    if (id === undefined) return 0
    const through = parseEventId(id)
    let count = 0
    while (count < this.#visible.length && parseEventId(this.#visible[count]?.id ?? '0') <= through) count += 1
    this.#visible = this.#visible.slice(count)
    this.#prunedThrough = Math.max(this.#prunedThrough, through)
    return count
  }

  read(query: EventQuery): Promise<EventPage> {
    const after = query.after === undefined ? 0 : parseEventId(query.after)
    if (query.after !== undefined && after < this.#prunedThrough) return Promise.reject(cursorExpired())
    const visible = this.#visible
    let low = 0
    let high = visible.length
    while (low < high) {
      const mid = (low + high) >>> 1
      if (parseEventId(visible[mid]?.id ?? '0') <= after) low = mid + 1
      else high = mid
    }
    const items: ChangeEvent[] = []
    let last = query.after ?? formatEventId(this.#prunedThrough)
    for (let i = low; i < visible.length && items.length < query.limit; i += 1) {
      const event = visible[i]
      if (event === undefined) break
      last = event.id
      if (query.userId !== undefined && event.userId !== query.userId) continue
      if (query.types !== undefined && !query.types.includes(event.type)) continue
      items.push(event)
    }
    return Promise.resolve({ items, nextCursor: last })
  }

  subscribe(wake: () => void): () => void {
    this.#wakers.add(wake)
    return () => { this.#wakers.delete(wake) }
  }
}
