import type { ChangeEvent, EventType } from '../../domain/event.js'
import { cursorValue, eventJson, formatEventId } from '../../domain/event.js'
import { EVENT_PAGE_MAX_BYTES, type EventPage, type EventQuery } from '../event-feed.js'
import { cursorExpired } from '../feed/journal.js'
import type { QueryResultRow } from './pg-types.js'

export type Query = <R extends QueryResultRow>(shape: {
  name: string
  text: string
  values: unknown[]
}) => Promise<{ rows: R[] }>

interface EventRow {
  /** 16 hex digits, written by the database: exact whatever the id. */
  id: string
  type: EventType
  time: string
  user_id: string
  version: number
  actor: string | null
  request_id: string | null
  changed: string | null
  user_json: string | null
}

interface PageRow extends QueryResultRow {
  head: string
  pruned: string
  /** Rows looked at (up to the count asked), and the events of those within the byte estimate. */
  scanned: number
  items: string
}

/** The largest bigint: no id is above it, so a cursor above it compares as it does. */
const MAX_BIGINT = 0x7fffffffffffffffn

/**
 * A lower bound of the bytes of an event's JSON, from its columns (escaping only adds): the
 * database stops a batch near the page's byte bound without reading the bodies past it.
 */
const LOWER_BOUND_BYTES = `64 + octet_length(type) + octet_length(time) + octet_length(user_id)
  + coalesce(octet_length(user_json) + 8, 0)`

/**
 * A page, fetched in batches that the database cuts near the byte bound (a lower estimate of
 * each event's size), so that a page of large events never has more than about the bound in
 * memory; the exact bound is then applied here. Each batch is one statement, one snapshot: its
 * head and its rows agree, so a page that ends short ends at the head. The head is the counter's
 * `last_id` as the statement's snapshot sees it: ids are taken in commit order (appendEvents), so
 * every event up to it is committed and seen by that snapshot, and every event committed later
 * has a larger id; no event can appear behind a cursor this page hands out.
 */
export async function readEventPage(run: Query, query: EventQuery): Promise<EventPage> {
  const cursor = query.after === undefined ? undefined : cursorValue(query.after)
  const maxBytes = query.maxBytes ?? EVENT_PAGE_MAX_BYTES
  const items: ChangeEvent[] = []
  let bytes = 0
  /** Every row up to here was looked at. */
  let position = cursor ?? 0n
  for (let first = true; ; first = false) {
    const wanted = query.limit - items.length
    const result = await run<PageRow>({
      name: 'events_page',
      text: `WITH bound AS (SELECT c.last_id AS head, c.pruned_through FROM event_counter c),
        scan AS (
          SELECT id, ${LOWER_BOUND_BYTES} AS estimate FROM events
          WHERE id > $1::bigint AND ($3::text IS NULL OR user_id = $3) AND ($4::text[] IS NULL OR type = ANY($4))
          ORDER BY id LIMIT $2),
        page AS (SELECT id, sum(estimate) OVER (ORDER BY id) - estimate AS before FROM scan)
        SELECT b.head::text AS head, b.pruned_through::text AS pruned, (SELECT count(*) FROM scan)::int AS scanned,
          coalesce((SELECT json_agg(row_to_json(e) ORDER BY e.id)::text FROM (
            SELECT lpad(to_hex(events.id), 16, '0') AS id, type, time, user_id, version, actor, request_id, changed, user_json
            FROM events JOIN page ON page.id = events.id WHERE page.before < $5) e), '[]') AS items
        FROM bound b`,
      // No id is above the largest bigint: a cursor past it (never sent by the HTTP layer) compares as it.
      values: [
        (position > MAX_BIGINT ? MAX_BIGINT : position).toString(),
        wanted,
        query.userId ?? null,
        query.types === undefined ? null : [...query.types],
        Math.max(1, maxBytes - bytes),
      ],
    })
    const row = result.rows[0]
    if (row === undefined) throw new Error('the event counter row is missing')
    const pruned = BigInt(row.pruned)
    if (first && cursor !== undefined && cursor < pruned) throw cursorExpired()
    // Pruned past this page while it was read: it ends here, and the next read says 410.
    if (!first && position < pruned) return { items, nextCursor: formatEventId(position) }
    const rows = JSON.parse(row.items) as EventRow[]
    for (const found of rows) {
      const event = toEvent(found)
      const size = Buffer.byteLength(eventJson(event))
      const before = items.at(-1)
      if (before !== undefined && bytes + size > maxBytes)
        return { items, nextCursor: resumeAt(before, event, query) }
      items.push(event)
      bytes += size
      position = cursorValue(event.id)
    }
    const last = items.at(-1)
    if (items.length === query.limit && last !== undefined) return { items, nextCursor: last.id }
    if (rows.length === row.scanned && row.scanned < wanted) {
      // Every match up to the head was looked at.
      const head = BigInt(row.head)
      let next = position > head ? position : head
      if (cursor === undefined && pruned > next) next = pruned
      return { items, nextCursor: formatEventId(next) }
    }
    // Full by bytes already (one event past the bound): where to resume is after it.
    if (bytes >= maxBytes && last !== undefined) return { items, nextCursor: last.id }
  }
}

/**
 * Where a page cut short by bytes resumes: unfiltered, after its last event (no event lies
 * between it and the one left out); filtered, just before
 * the match left out, so that the events between that do not match are not looked at again.
 */
function resumeAt(last: ChangeEvent, left: ChangeEvent, query: EventQuery): string {
  const filtered = query.userId !== undefined || query.types !== undefined
  return filtered ? formatEventId(cursorValue(left.id) - 1n) : last.id
}

function toEvent(row: EventRow): ChangeEvent {
  return {
    id: row.id,
    type: row.type,
    time: row.time,
    userId: row.user_id,
    version: row.version,
    ...(row.actor === null ? {} : { actor: row.actor }),
    ...(row.request_id === null ? {} : { requestId: row.request_id }),
    ...(row.changed === null ? {} : { changed: JSON.parse(row.changed) as string[] }),
    ...(row.user_json === null ? {} : { userJson: row.user_json }),
  }
}
