/**
 * The next events of one endpoint, read from the feed a page at a time ahead of its cursor. A
 * loop that fell behind the writes (the feed's cache holds only the newest events) would
 * otherwise open and read a segment of the log for every single event it delivers, and spend on
 * it more than on the delivery itself. What it holds is only a copy of the feed: the cursor, kept
 * in the store, still moves only after a 2xx, and any other cursor than the one it was read for
 * (moved by a client, by another process, or with other types) reads the feed again.
 */
import type { ChangeEvent, EventType } from '../domain/event.js'
import type { EventFeed } from '../store/event-feed.js'

/** Events read at once, and their bytes (as the feed counts them) at most: one event at least. */
export const READ_AHEAD_EVENTS = 64
export const READ_AHEAD_BYTES = 64 * 1024
/**
 * How long what was read serves: an endpoint retrying an event for hours reads the feed again, so
 * that one whose cursor the feed's pruning passed meanwhile is disabled (cursor_expired) rather
 * than delivering events the feed no longer holds. With a loop's longest wait (5 s), within a
 * minute.
 */
export const READ_AHEAD_MS = 55_000

export interface AheadPage {
  /** The first event after the cursor; undefined when there is none yet. */
  readonly event: ChangeEvent | undefined
  /** Where the feed stopped looking (past events the types leave out), as the feed says it. */
  readonly nextCursor: string
}

export class ReadAhead {
  /** The events read, the next one at `#at`, and the cursor it follows. */
  #events: readonly ChangeEvent[] = []
  #at = 0
  #after: string | undefined
  #types: readonly EventType[] | undefined
  /** When the feed was read, by `#now` (ms since the epoch). */
  #readAt = 0
  readonly #now: () => number

  constructor(now: () => number) {
    this.#now = now
  }

  /** The next event after `cursor` that `types` take, from what was read lately or from the feed. */
  async next(
    feed: Pick<EventFeed, 'read'>,
    cursor: string,
    types: readonly EventType[] | undefined,
  ): Promise<AheadPage> {
    const held = this.#events[this.#at]
    const fresh = this.#now() - this.#readAt < READ_AHEAD_MS
    if (held !== undefined && fresh && this.#after === cursor && this.#types === types)
      return { event: held, nextCursor: held.id }
    this.forget()
    const page = await feed.read({
      after: cursor,
      limit: READ_AHEAD_EVENTS,
      maxBytes: READ_AHEAD_BYTES,
      types,
    })
    this.#events = page.items
    this.#readAt = this.#now()
    this.#after = cursor
    this.#types = types
    const first = page.items[0]
    return { event: first, nextCursor: first === undefined ? page.nextCursor : first.id }
  }

  /** The event was delivered and the cursor moved past it: the next one follows it. */
  passed(eventId: string): void {
    if (this.#events[this.#at]?.id !== eventId) {
      this.forget()
      return
    }
    this.#at += 1
    this.#after = eventId
  }

  /** Drops what was read (the endpoint changed). */
  forget(): void {
    this.#events = []
    this.#at = 0
    this.#after = undefined
  }
}
