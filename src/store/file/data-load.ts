import type { IndexedState } from '../durability.js'
import { checkDataFormat } from './data-format.js'
import type { EventLog } from './event-log.js'
import { SEGMENT } from './event-segments.js'
import { loadFeed } from './feed-load.js'
import { checkJournalAccess, journalEnd } from './key-journal-files.js'
import { checkOwnFiles } from './own-files.js'
import { type Replayed, replayTail } from './replay.js'
import { loadSnapshot } from './snapshot-load.js'
import type { StoreDirs } from './store-dirs.js'
import { loadUserFiles, type UserFilesContext } from './user-files-load.js'
import { takeSnapshot } from './users-snapshot.js'

export interface DataLoad extends Omit<UserFilesContext, 'index' | 'tombstones'> {
  readonly dirs: StoreDirs
  readonly eventsDir: string
  readonly eventLog: EventLog
  readonly state: IndexedState
  /** Milliseconds since the epoch (an expired key is not written again by the replay). */
  readonly now: number
}

/**
 * What an open of the file store reads, in order: the layout's number (a later release's refuses
 * the start: data-format.ts), the event log's segments and the kept keys' journals are checked
 * to be plain files (a symbolic link refuses the start: own-files.ts) and the journals readable
 * (one that is not refuses the start, as an unreadable user file does), the snapshot's file is
 * taken aside before the replay writes anything, the log's tail past the checkpoint is replayed
 * into the files, then the users come from the snapshot when it still holds exactly what the
 * files do (users-snapshot.ts), from every file otherwise, and the feed's index from the log.
 * Returns the replay's outcome.
 */
export async function loadData(load: DataLoad): Promise<Replayed> {
  const { dirs, state, logger } = load
  await checkDataFormat(dirs.root)
  checkOwnFiles(load.eventsDir, (name) => SEGMENT.test(name))
  checkOwnFiles(dirs.keys.path, (name) => journalEnd(name) !== undefined)
  checkJournalAccess(dirs.keys.path, load.now)
  const snapshot = await takeSnapshot(dirs.root, load.usersDir, load.tombstonesDir)
  const replayed = await replayTail({ eventsDir: load.eventsDir, ...dirs, now: load.now })
  if (replayed.events > 0 || replayed.checkpoint === 'damaged')
    logger.info('replayed the event log past its checkpoint', { ...replayed })
  const files = { ...load, index: state.index, tombstones: state.tombstones }
  if (!(await loadSnapshot(snapshot, replayed.events, files))) await loadUserFiles(files)
  await loadFeed({
    eventLog: load.eventLog,
    journal: state.events,
    users: state.index,
    tombstones: state.tombstones,
    quarantineDir: load.quarantineDir,
    logger,
    now: load.now,
  })
  return replayed
}
