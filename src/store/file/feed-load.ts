import { readdir } from 'node:fs/promises'

import { type EventHead, eventIdNumber, idFloor } from '../../domain/event.js'
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
  /** DATA_DIR/quarantine/: a user whose file is there has events that are held back, not voided. */
  readonly quarantineDir: string
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
  const quarantined = await quarantinedUsers(context.quarantineDir)
  // Changes that were made: their user's file was damaged later and moved aside. They are left out
  // of the feed while it is there, and come back at the start after it is put back.
  const heldBack = new Set<number>()
  const unmadeBy = new Map<string, string>()
  const loaded = await eventLog.load(index, (event) => {
    if (isMade(event, context)) return true
    if (quarantined.has(event.userId)) heldBack.add(eventIdNumber(event.id))
    else unmadeBy.set(event.id, event.userId)
    return false
  })
  const ghosts = loaded.ghosts.filter((id) => !heldBack.has(eventIdNumber(id)))
  for (const id of ghosts) await eventLog.void(id)
  if (ghosts.length > 0) {
    // For good: after a crash that is right, but a user file edited back to an older version (or
    // restored alone) voids its later events too, which an operator should hear of.
    const users = new Set(ghosts.map((id) => unmadeBy.get(id)))
    logger.warn("events voided: their users' files do not hold their changes", {
      events: ghosts.length,
      users: [...users].slice(0, VOIDED_USERS_NAMED),
    })
  }
  if (heldBack.size > 0) {
    logger.warn("events held back from the feed: their users' files are in quarantine", {
      events: heldBack.size,
      quarantine: context.quarantineDir,
    })
  }
  // Past the clock's floor too: a data directory put back from an older backup numbers its new
  // events above those handed out before it was restored (docs/operations.md, backups).
  const nextId = Math.max(loaded.nextId, idFloor(context.now))
  context.journal.load(index, eventLog, nextId, loaded.prunedThrough)
  logger.info('events loaded', {
    events: loaded.events,
    voided: ghosts.length,
    heldBack: heldBack.size,
    damaged: loaded.damaged,
  })
}

/** How many of the users whose events a start voids its warning names. */
const VOIDED_USERS_NAMED = 20

/** Whether the change an event describes is in what was loaded. */
function isMade(event: EventHead, { users, tombstones }: FeedLoadContext): boolean {
  const user = users.get(event.userId)
  const gone = tombstones.has(event.userId)
  return event.type === 'user.deleted'
    ? gone
    : gone || (user !== undefined && user.user.version >= event.version)
}

/** The ids of the users whose files (or tombstones) a start moved to the quarantine. */
async function quarantinedUsers(dir: string): Promise<ReadonlySet<string>> {
  let names: string[]
  try {
    names = await readdir(dir)
  } catch {
    // No quarantine yet (or none to read): nothing is held back.
    return new Set()
  }
  const ids = new Set<string>()
  for (const name of names) {
    const id = QUARANTINED_USER.exec(name)?.[1]
    if (id !== undefined) ids.add(id)
  }
  return ids
}

/** A file moved aside as `<id>.json`, or `<id>.json.<ms>` when that name was taken. */
const QUARANTINED_USER =
  /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.json(?:\.\d+)?$/
