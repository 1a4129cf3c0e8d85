/** The channel every replica LISTENs on for new events. */
export const EVENT_CHANNEL = 'user_service_events'

/**
 * What a commit's notification says: the schema its session creates and finds the service's
 * tables in. The channel is the database's, shared by every service on it; a listener whose
 * session reads another schema is another service's, and reads nothing for this notification.
 */
export const NOTIFY_PAYLOAD = `coalesce(current_schema(), '')`

/**
 * The feed's tables (migration 2). Migration 4 replaced the way ids are handed out (see
 * EVENT_ID_MIGRATION); this one is never edited.
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

/** Ids per transaction under migration 4's numbering (`id_base + xid * 65,536 + n`). */
const EVENTS_PER_TRANSACTION = 65_536

/**
 * Migration 4: ids without a global lock. Until now each transaction took the next ids from
 * `event_counter.last_id`, a row lock held through COMMIT, so that every write of every replica
 * committed one at a time. Ids now come from the writing transaction's id (EVENTS_PER_TRANSACTION),
 * and readers stopped below the oldest transaction still running (until migration 5).
 *
 * `id_base` puts every new id above every old one and above every cursor handed out: a new
 * transaction's id is above this one's, so its events are above `last_id`. The table lock waits
 * for the writers of the previous release that hold the counter, and dropping `last_id` makes
 * those that come later fail their writes (and roll back, events and all) until they are replaced,
 * rather than write ids below the cursors of readers.
 */
export const EVENT_ID_MIGRATION: readonly string[] = [
  'LOCK TABLE event_counter IN ACCESS EXCLUSIVE MODE',
  'ALTER TABLE event_counter ADD COLUMN id_base bigint NOT NULL DEFAULT 0',
  `UPDATE event_counter SET id_base = greatest(0, last_id - pg_current_xact_id()::text::bigint * ${EVENTS_PER_TRANSACTION})`,
  'ALTER TABLE event_counter DROP COLUMN last_id',
]

/**
 * Migration 5: ids in commit order again, from a counter row taken as the last statement of each
 * transaction that appends events (see appendEvents). Migration 4's ids followed the order in
 * which transactions began writing, so two overlapping changes could be listed out of their
 * commit order, a restore onto a new server (whose transaction ids start low) numbered new events
 * below every old one, and any open transaction of the cluster held every reader back.
 *
 * `last_id` starts at the highest id handed out (the newest event, or the pruned bound): nothing
 * is renumbered, and every new id is above every id and cursor of the old numbering (a page's
 * `nextCursor` was never past its newest event or the pruned bound). The table lock waits for the
 * writers of the previous release, which read `event_counter` in their insert, so that every
 * event they wrote is committed and counted; dropping `id_base` makes the ones that come later
 * fail their writes (rolled back whole, event and change) until they are replaced.
 */
export const EVENT_COUNTER_MIGRATION: readonly string[] = [
  'LOCK TABLE event_counter IN ACCESS EXCLUSIVE MODE',
  'ALTER TABLE event_counter ADD COLUMN last_id bigint NOT NULL DEFAULT 0',
  'UPDATE event_counter SET last_id = greatest(pruned_through, coalesce((SELECT max(id) FROM events), 0))',
  'ALTER TABLE event_counter DROP COLUMN id_base',
]
