/** The channel every replica LISTENs on for new events. */
export const EVENT_CHANNEL = 'user_service_events'

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

/**
 * Ids per transaction: an event's id is `id_base + xid * EVENTS_PER_TRANSACTION + n`, where xid is
 * its transaction's 64-bit id (`pg_current_xact_id()`) and n its place in the transaction (1 up).
 * Ids therefore sort by (transaction id, place) and no lock is needed to hand them out. bigint
 * holds ids for 2^47 transactions (four and a half centuries at 10,000 a second); past that the
 * multiplication fails the write (bigint out of range) rather than wrap.
 */
export const EVENTS_PER_TRANSACTION = 65_536

/**
 * The lowest id a transaction that is still running, or starts later, can write: every event
 * below it is committed (or never will be). `pg_snapshot_xmin` of the statement's own snapshot is
 * the oldest transaction id running when that snapshot was taken, and a transaction id handed out
 * later is larger; so ids below this bound are final, and they are exactly the ones this
 * statement's snapshot sees below it. `c` is the event_counter row.
 */
export const FINAL_BELOW = `(c.id_base + pg_snapshot_xmin(pg_current_snapshot())::text::bigint * ${EVENTS_PER_TRANSACTION})`

/**
 * The newest final event's id (see FINAL_BELOW), or the pruned bound when none is left: where a
 * reader that has read everything resumes. `c` is the event_counter row.
 */
export const FINAL_HEAD = `greatest(c.pruned_through, coalesce((SELECT max(id) FROM events WHERE id < ${FINAL_BELOW}), 0))`

/**
 * Migration 4: ids without a global lock. Until now each transaction took the next ids from
 * `event_counter.last_id`, a row lock held through COMMIT, so that every write of every replica
 * committed one at a time. Ids now come from the writing transaction's id (EVENTS_PER_TRANSACTION),
 * and readers stop below the oldest transaction still running (FINAL_BELOW).
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
