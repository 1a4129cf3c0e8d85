import { type EventHead, idFloor } from '../../domain/event.js'
import type { Logger } from '../../log/logger.js'
import { EventIndex } from '../feed/event-index.js'
import type { EventJournal } from '../feed/journal.js'
import type { UserIndex } from '../user-index.js'
import type { EventLog } from './event-log.js'

export interface FeedLoadContext {
  readonly eventLog: EventLog
  readonly journal: EventJournal
  /** The users and tombstones loaded (after the replay). */
  readonly users: UserIndex
  readonly tombstones: ReadonlyMap<string, string>
  readonly logger: Logger
  /** Milliseconds since the epoch: the first new id is above idFloor of it. */
  readonly now: number
}

/**
 * Loads the feed's index (its bodies stay on disk) and reconciles it with the users loaded. The
 * replay has made every event past the checkpoint; an event at or behind it whose change is not
 * on disk is one whose change failed and whose void could not be written (the store turned
 * read-only), or one written before the log was the write-ahead log and cut off from its change
 * by a crash. Such an event is voided, durably, so that no later start takes it back.
 */
export async function loadFeed(context: FeedLoadContext): Promise<void> {
  const { eventLog, logger } = context
  const index = new EventIndex()
  const loaded = await eventLog.load(index, (event) => isMade(event, context))
  for (const id of loaded.ghosts) await eventLog.void(id)
  // Past the clock's floor too: a data directory put back from an older backup numbers its new
  // events above those handed out before it was restored (docs/operations.md, backups).
  const nextId = Math.max(loaded.nextId, idFloor(context.now))
  context.journal.load(index, eventLog, nextId, loaded.prunedThrough)
  logger.info('events loaded', {
    events: loaded.events,
    voided: loaded.ghosts.length,
    damaged: loaded.damaged,
  })
}

/** Whether the change an event describes is in what was loaded. */
function isMade(event: EventHead, { users, tombstones }: FeedLoadContext): boolean {
  const user = users.get(event.userId)
  const gone = tombstones.has(event.userId)
  return event.type === 'user.deleted'
    ? gone
    : gone || (user !== undefined && user.user.version >= event.version)
}
