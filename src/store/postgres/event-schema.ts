/** The channel every replica LISTENs on for new events. */
export const EVENT_CHANNEL = 'user_service_events'

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
