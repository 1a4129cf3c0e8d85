import type { ChangeEvent, EventType } from '../domain/event.js'

/** One page request of the feed (docs/events.md). */
export interface EventQuery {
  /** An event id: only events after it. Undefined: from the oldest retained. */
  readonly after?: string | undefined
  readonly limit: number
  readonly types?: readonly EventType[] | undefined
  readonly userId?: string | undefined
  /**
   * The most bytes of event JSON (as `eventJson` writes it) a page may hold (about 1 MiB per
   * response, docs/api.md's limits); a page whose next match would pass it ends early with a
   * `nextCursor` before that match. A page holds at least one match, whatever its size.
   * Undefined: EVENT_PAGE_MAX_BYTES.
   */
  readonly maxBytes?: number | undefined
  /**
   * The most events a filtered page (`types` or `userId`) examines (LIST_SCAN_BUDGET): past it the
   * page ends, short or even empty, with a `nextCursor` after the last event examined, so that
   * following it still yields every match once. Undefined: no bound (a live stream's reads).
   */
  readonly scanBudget?: number | undefined
  /**
   * A live stream's read after a wake-up: the feed may answer it from the events it already
   * holds in memory instead of asking its storage (the PostgreSQL feed does).
   */
  readonly live?: boolean | undefined
}

/** The default byte bound of one page of events (about 1 MiB, docs/api.md's limits). */
export const EVENT_PAGE_MAX_BYTES = 1024 * 1024

export interface EventPage {
  readonly items: readonly ChangeEvent[]
  /** Where to resume: never empty, also when the page is. */
  readonly nextCursor: string
}

/**
 * A store's change feed (`Store.events`), as the routes and the event streams read it: pages in
 * id order, and a wake-up when new events may be readable.
 */
export interface EventFeed {
  read(query: EventQuery): Promise<EventPage>
  /**
   * Where the feed ends: every event committed (readable) is at or below it, and every event
   * committed later above it. The newest event's id, or past it when ids were skipped (as a start
   * does: idFloor), `0000000000000000` for a store that numbered none: a new webhook endpoint's
   * cursor, so that it gets every change acknowledged after.
   */
  head(): Promise<string>
  /** Calls `wake` whenever new events may be readable; returns the unsubscribe. */
  subscribe(wake: () => void): () => void
  /** Events this process appended since it started (for /metrics). */
  readonly appended: number
  /**
   * How long the oldest commit now waiting to append its events has waited, in seconds, once
   * past the stall threshold (else 0); undefined for a feed that cannot stall (for /metrics).
   */
  readonly stalledSeconds?: number | undefined
  /** Commits that waited past the stall threshold since the start (for /metrics). */
  readonly stalls?: number | undefined
}
