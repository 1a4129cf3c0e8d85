import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { TextDecoder } from 'node:util'

import { type ChangeEvent, eventIdNumber, parseEvent } from '../../domain/event.js'
import type { DurableDirectory } from './atomic-write.js'
import {
  CHECKPOINT_FILE,
  checkpointJson,
  readCheckpoint,
  removeCheckpointTemps,
  syncFiles,
} from './checkpoint.js'
import { hasCode } from './errno.js'
import { SEGMENT, safeId } from './event-segments.js'
import { parseStoredUser, toTombstoneJson } from './stored-files.js'

const VOID = /^\{"void":"([0-9a-f]{16})"\}$/
const NEWLINE = 0x0a
/** Users written again at once while replaying. */
const REPLAY_AT_ONCE = 512

export interface ReplayDirs {
  readonly eventsDir: string
  readonly users: DurableDirectory
  readonly graves: DurableDirectory
  /** The data directory, where the checkpoint file is. */
  readonly root: DurableDirectory
}

export interface Replayed {
  /** The checkpoint after the replay. */
  readonly through: number
  /** Events past the old checkpoint, users written again from them, users deleted again. */
  readonly events: number
  readonly written: number
  readonly buried: number
  /** The checkpoint file was missing (a new or older data directory) or damaged. */
  readonly checkpoint: 'found' | 'missing' | 'damaged'
}

/**
 * Replays the log's tail past the checkpoint into the user files (CONTRACT §7, recipe b), before
 * anything is indexed or quarantined: each user the tail names ends as its last event left it
 * (written again durably, or its tombstone written and its file removed), then both directories
 * are fsynced and the checkpoint moves to the newest event. Running it again after a crash in the
 * middle does the same again. A torn last line was never acknowledged and is left out; voided
 * events, and lines that are not events (the load quarantines them), are skipped. A user file
 * with a higher version than the event was written by a change without an event (durable by
 * itself) and is kept. Without a checkpoint file, every change already made itself durable.
 */
export async function replayTail(dirs: ReplayDirs): Promise<Replayed> {
  await removeCheckpointTemps(dirs.root)
  const found = readCheckpoint(dirs.root.path)
  const after = typeof found === 'number' ? found : 0
  const tail = readTail(dirs.eventsDir, after)
  let written = 0
  let buried = 0
  if (found !== undefined) {
    const last = new Map<string, ChangeEvent>()
    for (const event of tail.events) if (!tail.voided.has(event.id)) last.set(event.userId, event)
    const userFiles: string[] = []
    const graveFiles: string[] = []
    const replay = async ([userId, event]: [string, ChangeEvent]): Promise<void> => {
      const name = `${userId}.json`
      if (event.type === 'user.deleted') {
        await dirs.graves.writeFile(
          name,
          toTombstoneJson({ id: userId, deletedAt: event.time }),
          undefined,
          false,
        )
        graveFiles.push(name)
        await removeIfThere(dirs.users, name)
        buried += 1
      } else if (event.userJson !== undefined && !newerOnDisk(dirs.users.path, event)) {
        await dirs.users.writeFile(name, event.userJson, undefined, false)
        userFiles.push(name)
        written += 1
      }
    }
    // Many at once, a bounded number in memory.
    const users = [...last]
    for (let at = 0; at < users.length; at += REPLAY_AT_ONCE)
      await Promise.all(users.slice(at, at + REPLAY_AT_ONCE).map(replay))
    await syncFiles(dirs.users, userFiles)
    await syncFiles(dirs.graves, graveFiles)
    await Promise.all([dirs.users.sync(), dirs.graves.sync()])
  }
  const through = Math.max(after, tail.highest)
  if (found !== through) await dirs.root.writeFile(CHECKPOINT_FILE, checkpointJson(through))
  return {
    through,
    events: found === undefined ? 0 : tail.events.length,
    written,
    buried,
    checkpoint: found === undefined ? 'missing' : found === 'damaged' ? 'damaged' : 'found',
  }
}

/** The events past `after` in the segments, the ids voided anywhere, and the highest id seen. */
function readTail(
  dir: string,
  after: number,
): { events: ChangeEvent[]; voided: Set<string>; highest: number } {
  const names = readdirSync(dir)
    .filter((name) => SEGMENT.test(name))
    .sort()
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
  const events: ChangeEvent[] = []
  const voided = new Set<string>()
  let highest = 0
  for (const [at, name] of names.entries()) {
    // A segment holds ids from its name's up to the next one's: skip those wholly behind.
    const next = names[at + 1]
    if (next !== undefined && eventIdNumber(next.slice(0, 16)) - 1 <= after) continue
    const data = readFileSync(path.join(dir, name))
    const end = data.lastIndexOf(NEWLINE) + 1
    for (let offset = 0; offset < end; ) {
      const stop = data.indexOf(NEWLINE, offset)
      const text = decodeLine(decoder, data.subarray(offset, stop))
      offset = stop + 1
      const gone = text === undefined ? undefined : VOID.exec(text)?.[1]
      if (gone !== undefined) {
        voided.add(gone)
        continue
      }
      const event = text === undefined ? undefined : parseEvent(text)
      const id = event === undefined ? undefined : safeId(event.id)
      if (event === undefined || id === undefined) continue
      highest = Math.max(highest, id)
      if (id > after) events.push(event)
    }
  }
  events.sort((a, b) => (a.id < b.id ? -1 : 1))
  return { events, voided, highest }
}

function decodeLine(decoder: TextDecoder, line: Uint8Array): string | undefined {
  try {
    return decoder.decode(line)
  } catch {
    return undefined
  }
}

/** Whether the user's file is whole and newer than the event (a change without an event). */
function newerOnDisk(usersDir: string, event: ChangeEvent): boolean {
  let text: string
  try {
    text = readFileSync(path.join(usersDir, `${event.userId}.json`), 'utf8')
  } catch {
    return false
  }
  const user = parseStoredUser(text, event.userId)
  return user !== undefined && user.version > event.version
}

async function removeIfThere(dir: DurableDirectory, name: string): Promise<void> {
  try {
    await dir.removeFile(name, false)
  } catch (error) {
    if (!hasCode(error instanceof Error ? error.cause : undefined, 'ENOENT')) throw error
  }
}
