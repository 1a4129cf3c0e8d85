import type { PoolClient } from 'pg'

import { internalFault } from '../../domain/errors.js'
import type { EventDraft } from '../../domain/event.js'
import { EVENT_CHANNEL, EVENTS_PER_TRANSACTION } from './event-schema.js'

/**
 * Appends the events of a transaction's changes inside it, once per transaction, after its
 * changes: one statement for any number, their ids consecutive in the order given. Nothing is
 * locked: the ids come from the transaction's own id (EVENTS_PER_TRANSACTION), so that writers
 * on every replica commit side by side.
 */
export async function appendEvents(
  client: PoolClient,
  drafts: readonly EventDraft[],
): Promise<void> {
  if (drafts.length === 0) return
  if (drafts.length >= EVENTS_PER_TRANSACTION)
    throw internalFault(
      `${drafts.length} events in one transaction: at most ${EVENTS_PER_TRANSACTION - 1}`,
    )
  const column = <K extends keyof EventDraft>(key: K): unknown[] =>
    drafts.map((draft) => draft[key] ?? null)
  await client.query({
    name: 'events_append',
    // The NOTIFY is delivered at COMMIT to every replica that listens: a wake-up only, the poll
    // stays the truth. One statement, so that the feed costs a write one round trip.
    text: `WITH added AS (INSERT INTO events (id, type, time, user_id, version, actor, request_id, changed, user_json)
        SELECT c.id_base + pg_current_xact_id()::text::bigint * ${EVENTS_PER_TRANSACTION} + e.n,
          e.type, e.time, e.user_id, e.version, e.actor, e.request_id, e.changed, e.user_json
        FROM event_counter c, unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[])
          WITH ORDINALITY AS e(type, time, user_id, version, actor, request_id, changed, user_json, n)
        RETURNING id)
      SELECT pg_notify('${EVENT_CHANNEL}', '') FROM added LIMIT 1`,
    values: [
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
