import type { Tombstone } from '../../domain/tombstone.js'
import type { UserRecord } from '../../domain/user.js'
import type { LogEvent } from '../durability.js'
import type { DurableDirectory } from './atomic-write.js'
import type { Checkpoint } from './checkpoint.js'
import { toTombstoneJson } from './stored-files.js'

/** What a change's file step needs of the file store. */
export interface FileSteps {
  readonly users: DurableDirectory
  readonly graves: DurableDirectory
  readonly checkpoint: Checkpoint | undefined
}

/**
 * The user file renamed into place unsynced: its event in the log makes it durable. The temp file
 * is written before the event is logged, so that a full disk refuses the change before the log
 * holds it. A failure after the event is durable leaves a committed change whose file only the
 * replay at the next start can write: the checkpoint is held behind its event.
 */
export async function writeUser(
  steps: FileSteps,
  record: UserRecord,
  log: LogEvent,
): Promise<void> {
  const id = record.user.id
  const name = `${id}.json`
  await writeOwed(steps, id)
  const logged = loggedOnce(log)
  try {
    await steps.users.writeFile(name, record.json, logged.log, false)
    steps.checkpoint?.touched('users', name)
    steps.checkpoint?.rewritten(id)
  } catch (error) {
    if (logged.durable) steps.checkpoint?.hold(id)
    throw error
  } finally {
    steps.checkpoint?.end(id)
  }
}

/**
 * The tombstone is renamed into place before the user file goes, so that no moment shows neither.
 * Until the unlink, the user file wins at load: a failed tombstone write, or a failed unlink,
 * leaves the user as it was on disk, and the replay of the deletion's event ends it.
 */
export async function buryUser(
  steps: FileSteps,
  tombstone: Tombstone,
  log: LogEvent,
): Promise<void> {
  const name = `${tombstone.id}.json`
  await writeOwed(steps, tombstone.id)
  const logged = loggedOnce(log)
  try {
    await steps.graves.writeFile(name, toTombstoneJson(tombstone), logged.log, false)
    steps.checkpoint?.touched('tombstones', name)
    await steps.users.removeFile(name, false)
    steps.checkpoint?.touched('users')
    steps.checkpoint?.rewritten(tombstone.id)
  } catch (error) {
    if (logged.durable) steps.checkpoint?.hold(tombstone.id)
    throw error
  } finally {
    steps.checkpoint?.end(tombstone.id)
  }
}

/**
 * An imported user's change: committed once its event is durable, its file owed to the next
 * checkpoint (which writes it in a batch, then fsyncs it, before it moves past the event). Until
 * then the log alone holds the file's content, as it does for any change past the checkpoint.
 */
export async function oweUser(
  checkpoint: Checkpoint,
  record: UserRecord,
  log: LogEvent,
): Promise<void> {
  const id = record.user.id
  try {
    await log()
    checkpoint.owe(id, `${id}.json`, record.json)
  } finally {
    checkpoint.end(id)
  }
}

/**
 * Before any other change of a user: the file its import still owes is written first (or, when
 * the checkpoint is writing it, that write is waited for), so that the older content can never
 * be renamed over the newer. A failure refuses the change before its event is logged.
 */
async function writeOwed(steps: FileSteps, userId: string): Promise<void> {
  const checkpoint = steps.checkpoint
  if (checkpoint === undefined) return
  const name = `${userId}.json`
  for (let batch = checkpoint.owedWriting(name); batch !== undefined; ) {
    await batch
    batch = checkpoint.owedWriting(name)
  }
  const owed = checkpoint.takeOwed(name)
  if (owed === undefined) return
  try {
    await steps.users.writeFile(name, owed.json, undefined, false)
    checkpoint.touched('users', name)
  } catch (error) {
    checkpoint.reowe(name, owed)
    throw error
  } finally {
    checkpoint.end(userId)
  }
}

/** The step's `log`, and whether it resolved (the change committed). */
function loggedOnce(log: LogEvent): { readonly log: LogEvent; readonly durable: boolean } {
  const state = {
    durable: false,
    log: async (): Promise<void> => {
      await log()
      state.durable = true
    },
  }
  return state
}

/**
 * Owed files past which an imported user's file is written as any other change's (on the request
 * path, fsynced by the checkpoint): each owed file is one the replay writes after a crash, and a
 * long import must not stall while a checkpoint writes that many.
 */
const OWED_BACKLOG = 32_768

/**
 * A change's file step: an imported user's file (`later`) is owed to the checkpoint while fewer
 * than OWED_BACKLOG are, any other written now (writeUser).
 */
export function persistUser(
  steps: FileSteps,
  record: UserRecord,
  log: LogEvent,
  later: boolean,
): Promise<void> {
  const { checkpoint } = steps
  if (!later || checkpoint === undefined || checkpoint.owed >= OWED_BACKLOG)
    return writeUser(steps, record, log)
  return oweUser(checkpoint, record, log)
}
