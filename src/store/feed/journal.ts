import { ServiceError } from '../../domain/errors.js'
import {
  type ChangeEvent,
  cursorFloor,
  type EventDraft,
  eventIdNumber,
  eventJson,
  formatEventId,
} from '../../domain/event.js'
import {
  EVENT_PAGE_MAX_BYTES,
  type EventFeed,
  type EventPage,
  type EventQuery,
} from '../event-feed.js'
import { EventIndex, type EventPlace } from './event-index.js'

export const ZERO_CURSOR = formatEventId(0)

/** A cursor before the oldest retained event: the consumer missed events (docs/events.md). */
export function cursorExpired(): ServiceError {
  return new ServiceError(
    'cursor_expired',
    'This cursor is older than the retained feed: events after it were pruned. Start again without after.',
  )
}

/**
 * Where a journal keeps the bodies of its events (the index keeps only where they are): in
 * memory, or the file store's log on disk.
 */
export interface EventBodies {
  /** The event just became readable at `slot`: where its body is kept. */
  keep(slot: number, event: ChangeEvent): EventPlace
  /** The event was voided: its body will never be asked for. */
  discard(event: ChangeEvent): void
  /**
   * The bodies of these rows of `index`, in order; undefined when some were dropped meanwhile
   * (a prune): the reader looks again.
   */
  read(index: EventIndex, slots: readonly number[]): Promise<ChangeEvent[] | undefined>
  /** Every row before `slot` was dropped. */
  dropBefore(slot: number): void
}

/** Bodies in memory: the memory store's feed, which has no disk. */
class MemoryBodies implements EventBodies {
  #events: ChangeEvent[] = []
  #first = 0

  keep(slot: number, event: ChangeEvent): EventPlace {
    this.#events[slot - this.#first] = event
    return { segment: 0, offset: 0, bytes: Buffer.byteLength(eventJson(event)) }
  }

  discard(): void {}

  read(_index: EventIndex, slots: readonly number[]): Promise<ChangeEvent[] | undefined> {
    const events: ChangeEvent[] = []
    for (const slot of slots) {
      const event = this.#events[slot - this.#first]
      if (event === undefined) return Promise.resolve(undefined)
      events.push(event)
    }
    return Promise.resolve(events)
  }

  dropBefore(slot: number): void {
    if (slot <= this.#first) return
    this.#events = this.#events.slice(slot - this.#first)
    this.#first = slot
  }
}

/** How often a page is looked up again when a prune dropped its rows while it was read. */
const READ_ATTEMPTS = 3

/**
 * The feed, in id order: an index in memory (a few numbers per event) and the bodies where the
 * store keeps them. Ids are handed out as changes start (so that the file log is in id order),
 * but an event becomes readable only once it and every lower id are settled (committed or
 * voided): a reader never sees id 6 before id 5, so a cursor never skips one.
 */
export class EventJournal implements EventFeed {
  #index = new EventIndex()
  #bodies: EventBodies = new MemoryBodies()
  /** Ids handed out and not yet readable: undefined while in flight, null when voided. */
  readonly #settled = new Map<number, ChangeEvent | null | undefined>()
  readonly #wakers = new Set<() => void>()
  #nextId = 1
  /** Every id up to this one is settled (readable, voided or pruned). */
  #through = 0
  /** Every id up to this one was pruned. */
  #prunedThrough = 0
  appended = 0

  /** The id the next change takes. */
  get nextId(): number {
    return this.#nextId
  }

  /**
   * Takes what a durable log holds: its index (rows in id order), where their bodies are read,
   * the next id, and what was pruned.
   */
  load(index: EventIndex, bodies: EventBodies, nextId: number, prunedThrough: number): void {
    this.#index = index
    this.#bodies = bodies
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
    this.#settle(eventIdNumber(event.id), event)
  }

  void(event: ChangeEvent): void {
    this.#bodies.discard(event)
    this.#settle(eventIdNumber(event.id), null)
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
        const place = this.#bodies.keep(this.#index.end, next)
        this.#index.push(this.#through, next.type, next.userId, place)
        advanced = true
      }
    }
    if (advanced) for (const wake of this.#wakers) wake()
  }

  /** Drops every event up to this id (the file log prunes whole segments); returns how many. */
  dropThrough(through: number): number {
    const slot = this.#index.firstAfter(through)
    const count = slot - this.#index.start
    this.#index.dropBefore(slot)
    this.#bodies.dropBefore(slot)
    this.#prunedThrough = Math.max(this.#prunedThrough, through)
    return count
  }

  async read(query: EventQuery): Promise<EventPage> {
    for (let attempt = 1; ; attempt += 1) {
      const plan = this.#plan(query)
      if (plan.slots.length === 0) return { items: [], nextCursor: plan.nextCursor }
      const events = await this.#bodies.read(this.#index, plan.slots)
      if (events !== undefined) return boundPage(events, plan.nextCursor, query)
      if (attempt === READ_ATTEMPTS)
        throw new Error('the feed was pruned under every attempt to read this page')
    }
  }

  /**
   * The rows of a page, from the index alone: up to `limit` matches after the cursor, stopping
   * before the match that would pass the byte bound (one match at least), and after `scanBudget`
   * rows examined when the page is filtered; `nextCursor` is the last row looked at, or the
   * cursor given when there was none.
   */
  #plan(query: EventQuery): { slots: number[]; nextCursor: string } {
    const after = query.after === undefined ? undefined : cursorFloor(query.after)
    if (after !== undefined && after < this.#prunedThrough) throw cursorExpired()
    const index = this.#index
    const maxBytes = query.maxBytes ?? EVENT_PAGE_MAX_BYTES
    const from = after === undefined ? index.start : index.firstAfter(after)
    const given = query.after ?? formatEventId(this.#prunedThrough)
    const matches = index.matcher(query.types, query.userId)
    if (matches === undefined) {
      // No row can match: the page covers every row there is.
      return {
        slots: [],
        nextCursor: from < index.end ? formatEventId(index.idAt(index.end - 1)) : given,
      }
    }
    const slots: number[] = []
    let bytes = 0
    let last: number | undefined
    const filtered = query.types !== undefined || query.userId !== undefined
    const budget = filtered ? Math.max(1, query.scanBudget ?? Infinity) : Infinity
    const stop = Math.min(index.end, from + budget)
    for (let slot = from; slot < stop && slots.length < query.limit; slot += 1) {
      if (matches(slot)) {
        const size = index.bytesAt(slot)
        if (slots.length > 0 && bytes + size > maxBytes) break
        bytes += size
        slots.push(slot)
      }
      last = index.idAt(slot)
    }
    return { slots, nextCursor: last === undefined ? given : formatEventId(last) }
  }

  /**
   * Every id up to #through is settled: the newest readable event, or a voided id after it (the
   * same place to read on from), or the pruned bound.
   */
  head(): Promise<string> {
    return Promise.resolve(formatEventId(this.#through))
  }

  subscribe(wake: () => void): () => void {
    this.#wakers.add(wake)
    return () => {
      this.#wakers.delete(wake)
    }
  }
}

/**
 * The page's events within the byte bound, measured exactly as they are sent (the index's sizes
 * are the bodies' as stored, which match unless a log line was written otherwise).
 */
function boundPage(
  events: readonly ChangeEvent[],
  nextCursor: string,
  query: EventQuery,
): EventPage {
  const maxBytes = query.maxBytes ?? EVENT_PAGE_MAX_BYTES
  let bytes = 0
  for (const [i, event] of events.entries()) {
    bytes += Buffer.byteLength(eventJson(event))
    if (i > 0 && bytes > maxBytes)
      return { items: events.slice(0, i), nextCursor: formatEventId(eventIdNumber(event.id) - 1) }
  }
  return { items: events, nextCursor }
}
