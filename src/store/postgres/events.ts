import type { PoolClient, QueryResultRow } from 'pg'

import type { ChangeEvent, EventDraft, EventType } from '../../domain/event.js'
import { cursorValue, eventJson, formatEventId } from '../../domain/event.js'
import {
  cursorExpired,
  EVENT_PAGE_MAX_BYTES,
  type EventFeed,
  type EventPage,
  type EventQuery,
} from '../feed/journal.js'

/** The channel every replica LISTENs on for new events. */
const CHANNEL = 'user_service_events'

/**
 * The feed's tables (migration 2). Ids come from a one-row counter updated in the same transaction
 * as the change, as its last statement: the row lock it takes is held until COMMIT, so ids are
 * handed out in commit order and a reader that has seen id n has seen every id below it (a
 * bigserial would not: a lower id can commit after a higher one, and a reader would skip it).
 */
export const EVENT_MIGRATION: readonly string[] = [
  `CREATE TABLE events (
    id bigint PRIMARY KEY,
    type text COLLATE "C" NOT NULL,
    time text COLLATE "C" NOT NULL,
    user_id text COLLATE "C" NOT NULL,
    version integer NOT NULL,
    actor text,
    request_id text,
    changed text,
    user_json text
  )`,
  'CREATE INDEX events_user_id ON events (user_id, id)',
  'CREATE INDEX events_time ON events (time)',
  `CREATE TABLE event_counter (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    last_id bigint NOT NULL,
    pruned_through bigint NOT NULL
  )`,
  'INSERT INTO event_counter (one, last_id, pruned_through) VALUES (true, 0, 0)',
]

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
 * Appends the events of a transaction's changes inside it, last, so that the counter's lock is
 * held briefly: one statement for any number, their ids consecutive in the order given.
 */
export async function appendEvents(
  client: PoolClient,
  drafts: readonly EventDraft[],
): Promise<void> {
  if (drafts.length === 0) return
  const column = <K extends keyof EventDraft>(key: K): unknown[] =>
    drafts.map((draft) => draft[key] ?? null)
  await client.query({
    name: 'events_append',
    // The NOTIFY is delivered at COMMIT to every replica that listens: a wake-up only, the poll
    // stays the truth. One statement, so that the feed costs a write one round trip.
    text: `WITH next AS (UPDATE event_counter SET last_id = last_id + $1 RETURNING last_id),
      added AS (INSERT INTO events (id, type, time, user_id, version, actor, request_id, changed, user_json)
        SELECT next.last_id - $1 + e.n, e.type, e.time, e.user_id, e.version, e.actor, e.request_id, e.changed, e.user_json
        FROM next, unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::text[], $9::text[])
          WITH ORDINALITY AS e(type, time, user_id, version, actor, request_id, changed, user_json, n)
        RETURNING id)
      SELECT pg_notify('${CHANNEL}', '') FROM added LIMIT 1`,
    values: [
      drafts.length,
      column('type'),
      column('time'),
      column('userId'),
      column('version'),
      column('actor'),
      column('requestId'),
      drafts.map((draft) => (draft.changed === undefined ? null : JSON.stringify(draft.changed))),
      column('userJson'),
    ],
  })
}

type Query = <R extends QueryResultRow>(shape: {
  name: string
  text: string
  values: unknown[]
}) => Promise<{ rows: R[] }>

/**
 * The feed read from the database, so that a stream on any replica sees what every replica
 * committed. Followers are woken by this process's own commits at once, and by a poll of the
 * counter (every `pollMs`) for the commits of other replicas: the poll is the truth.
 */
export class PostgresEventFeed implements EventFeed {
  readonly #query: Query
  readonly #listen: (() => Promise<PoolClient>) | undefined
  #listener: Promise<PoolClient | undefined> | undefined
  readonly #pollMs: number
  readonly #wakers = new Set<() => void>()
  #poll: NodeJS.Timeout | undefined
  #head = ''
  appended = 0

  /** `listen` gives a connection of its own for LISTEN, held while anyone follows the feed. */
  constructor(query: Query, pollMs = 200, listen?: () => Promise<PoolClient>) {
    this.#query = query
    this.#pollMs = pollMs
    this.#listen = listen
  }

  /**
   * A page, fetched in batches that the database cuts near the byte bound (a lower estimate of
   * each event's size), so that a page of large events never has more than about the bound in
   * memory; the exact bound is then applied here. Each batch is one statement, one snapshot: its
   * head and its rows agree, so a page that ends short ends at the head.
   */
  async read(query: EventQuery): Promise<EventPage> {
    const cursor = query.after === undefined ? undefined : cursorValue(query.after)
    const maxBytes = query.maxBytes ?? EVENT_PAGE_MAX_BYTES
    const items: ChangeEvent[] = []
    let bytes = 0
    /** Every row up to here was looked at. */
    let position = cursor ?? 0n
    for (let first = true; ; first = false) {
      const wanted = query.limit - items.length
      const result = await this.#query<PageRow>({
        name: 'events_page_bounded',
        text: `WITH scan AS (
            SELECT id, ${LOWER_BOUND_BYTES} AS estimate FROM events
            WHERE id > $1::bigint AND ($3::text IS NULL OR user_id = $3) AND ($4::text[] IS NULL OR type = ANY($4))
            ORDER BY id LIMIT $2),
          page AS (SELECT id, sum(estimate) OVER (ORDER BY id) - estimate AS before FROM scan)
          SELECT c.last_id::text AS head, c.pruned_through::text AS pruned, (SELECT count(*) FROM scan)::int AS scanned,
            coalesce((SELECT json_agg(row_to_json(e) ORDER BY e.id)::text FROM (
              SELECT lpad(to_hex(events.id), 16, '0') AS id, type, time, user_id, version, actor, request_id, changed, user_json
              FROM events JOIN page ON page.id = events.id WHERE page.before < $5) e), '[]') AS items
          FROM event_counter c`,
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
        if (items.length > 0 && bytes + size > maxBytes)
          return { items, nextCursor: formatEventId(cursorValue(event.id) - 1n) }
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

  subscribe(wake: () => void): () => void {
    this.#wakers.add(wake)
    if (this.#poll === undefined) {
      this.#poll = setInterval(() => {
        void this.#check()
      }, this.#pollMs)
      this.#poll.unref()
      this.#startListening()
    }
    return () => {
      this.#wakers.delete(wake)
      if (this.#wakers.size === 0) this.stop()
    }
  }

  /** This process committed an event: its followers need not wait for the poll. */
  committed(): void {
    this.appended += 1
    this.#wake()
  }

  #wake(): void {
    for (const wake of this.#wakers) wake()
  }

  stop(): void {
    clearInterval(this.#poll)
    this.#poll = undefined
    const listener = this.#listener
    this.#listener = undefined
    void listener?.then((client) => {
      if (client === undefined) return
      client.removeAllListeners('notification')
      // Dropped, not reused: the connection still listens.
      client.release(true)
    })
  }

  #startListening(): void {
    if (this.#listen === undefined || this.#listener !== undefined) return
    const listen = this.#listen
    this.#listener = (async () => {
      try {
        const client = await listen()
        client.on('notification', () => {
          this.#wake()
        })
        client.on('error', () => undefined)
        await client.query(`LISTEN ${CHANNEL}`)
        return client
      } catch {
        // No wake-ups: the poll alone finds new events.
        return undefined
      }
    })()
  }

  /** Deletes every event up to the newest one older than `cutoff`, in one statement. */
  async prune(cutoff: string): Promise<void> {
    await this.#query({
      name: 'events_prune',
      text: `WITH cut AS (SELECT max(id) AS through FROM events WHERE time < $1),
        gone AS (DELETE FROM events WHERE id <= (SELECT through FROM cut) RETURNING 1)
        UPDATE event_counter SET pruned_through = greatest(pruned_through, coalesce((SELECT through FROM cut), 0))
        WHERE (SELECT through FROM cut) IS NOT NULL`,
      values: [cutoff],
    })
  }

  async #check(): Promise<void> {
    try {
      const result = await this.#query<{ head: string }>({
        name: 'events_head',
        text: 'SELECT last_id::text AS head FROM event_counter',
        values: [],
      })
      const head = result.rows[0]?.head ?? ''
      if (head === this.#head) return
      this.#head = head
      this.#wake()
    } catch {
      // The database is away: the next poll tries again, and readiness says so meanwhile.
    }
  }
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
