import type { PoolClient } from 'pg'

import type { EventDraft } from '../../domain/event.js'
import { EVENT_CHANNEL } from './event-schema.js'

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
      SELECT pg_notify('${EVENT_CHANNEL}', '') FROM added LIMIT 1`,
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
