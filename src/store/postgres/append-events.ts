import type { EventDraft } from '../../domain/event.js'
import { EVENT_CHANNEL, NOTIFY_PAYLOAD } from './event-schema.js'
import type { PoolClient } from './pg-types.js'

/**
 * Appends the events of a transaction's changes inside it, once per transaction, as its last
 * statement before COMMIT: one statement for any number, their ids consecutive in the order
 * given. The ids come from the counter row `event_counter.last_id`, whose row lock this statement
 * takes and holds through COMMIT: the transactions that append events therefore take their ids
 * one after another, each after the previous one has ended, so ids increase in commit order (see
 * docs/postgresql.md). Only the tail of a transaction waits for the lock (this statement and the
 * COMMIT), and a group commit takes it once for all its changes.
 */
export async function appendEvents(
  client: PoolClient,
  drafts: readonly EventDraft[],
  seenHead: bigint,
): Promise<void> {
  if (drafts.length === 0) return
  const column = <K extends keyof EventDraft>(key: K): unknown[] =>
    drafts.map((draft) => draft[key] ?? null)
  await client.query({
    name: 'events_append',
    // The NOTIFY is delivered at COMMIT to every replica that listens: a wake-up only, the poll
    // stays the truth (docs/postgresql.md says why it stays). It names the tables' schema, so
    // that a service on another schema of the same database, on the same channel, reads nothing
    // for it. One statement, so that the feed costs a write one round trip.
    // A counter below an id this process saw committed was restored from an older dump under
    // the running replicas: it jumps above every id handed out before, to the database clock's
    // idFloor (milliseconds times 256), as a start after a restore does (raiseIdFloor).
    text: `WITH counter AS (UPDATE event_counter
        SET last_id = CASE WHEN last_id < $10 THEN greatest($10, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint * 256) ELSE last_id END + $9
        RETURNING last_id - $9 AS base),
      added AS (INSERT INTO events (id, type, time, user_id, version, actor, request_id, changed, user_json)
        SELECT counter.base + e.n, e.type, e.time, e.user_id, e.version, e.actor, e.request_id, e.changed, e.user_json
        FROM counter, unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[])
          WITH ORDINALITY AS e(type, time, user_id, version, actor, request_id, changed, user_json, n)
        RETURNING id)
      SELECT pg_notify('${EVENT_CHANNEL}', ${NOTIFY_PAYLOAD}) FROM added LIMIT 1`,
    values: [
      column('type'),
      column('time'),
      column('userId'),
      column('version'),
      column('actor'),
      column('requestId'),
      drafts.map((draft) => (draft.changed === undefined ? null : JSON.stringify(draft.changed))),
      column('userJson'),
      drafts.length,
      seenHead.toString(),
    ],
  })
}

/**
 * Moves the counter up to `floor` (idFloor of the clock) when it is below, at every open: after a
 * dump older than the feed was restored, the ids numbered next start above every id handed out
 * before (docs/postgresql.md, backups). Takes the counter's row lock for a moment, as an append.
 */
export async function raiseIdFloor(client: PoolClient, floor: number): Promise<void> {
  await client.query('UPDATE event_counter SET last_id = $1 WHERE last_id < $1', [floor])
}
