import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { TextDecoder } from 'node:util'

import { type ChangeEvent, eventIdNumber, parseEvent, parseEventHead } from '../../domain/event.js'
import type { DurableDirectory } from './atomic-write.js'
import {
  CHECKPOINT_FILE,
  checkpointJson,
  readCheckpoint,
  removeCheckpointTemps,
  syncFiles,
} from './checkpoint-file.js'
import { hasCode } from './errno.js'
import { leadingId, SEGMENT, safeId } from './event-segments.js'
import { replayKeys } from './key-replay.js'
import { readLines } from './segment-lines.js'
import { parseStoredUser, toTombstoneJson } from './stored-files.js'

const VOID = /^\{"void":"([0-9a-f]{16})"\}$/
const VOID_START = '{"void":'
/**
 * Users written again at once while replaying: enough to keep libuv's threads busy, few enough
 * that starting a batch (a synchronous read of each user's file) stays short.
 */
const REPLAY_AT_ONCE = 64

export interface ReplayDirs {
  readonly eventsDir: string
  readonly users: DurableDirectory
  readonly graves: DurableDirectory
  /** DATA_DIR/keys, where the kept `Idempotency-Key`s are. */
  readonly keys: DurableDirectory
  /** The data directory, where the checkpoint file is. */
  readonly root: DurableDirectory
  /** Milliseconds since the epoch: a key that has expired is not written again. */
  readonly now: number
}

export interface Replayed {
  /** The checkpoint after the replay. */
  readonly through: number
  /** Events past the old checkpoint, users written again from them, users deleted again. */
  readonly events: number
  readonly written: number
  readonly buried: number
  /** Kept keys appended again to their journals from their lines. */
  readonly keys: number
  /** The checkpoint file was missing (a new or older data directory) or damaged. */
  readonly checkpoint: 'found' | 'missing' | 'damaged'
}

/**
 * Replays the log's tail past the checkpoint into the user files (the write-ahead log, see
 * docs/events.md), before anything is indexed or quarantined: each user the tail names ends as its
 * last event left it (written again, or its tombstone written and its file removed), then both
 * directories are fsynced and the checkpoint moves to the newest event. Running it again after a
 * crash in the middle does the same again. A torn last line was never acknowledged and is left out; voided
 * events, and lines that are not events (the load quarantines them), are skipped. A user file
 * with a higher version than the event was written by a change without an event (durable by
 * itself) and is kept. Without a checkpoint file, every change already made itself durable: only
 * the newest id is read. The tail is streamed (readLines), four times: the voids, then each
 * user's last event, then those events written, then the kept keys' journal lines (replayKeys);
 * memory holds a few numbers per user named, never the tail, and the event loop is served
 * throughout.
 */
export async function replayTail(dirs: ReplayDirs): Promise<Replayed> {
  await removeCheckpointTemps(dirs.root)
  const found = readCheckpoint(dirs.root.path)
  const after = typeof found === 'number' ? found : 0
  const files = tailFiles(dirs.eventsDir, after)
  const voided = found === undefined ? new Set<number>() : await readVoids(files)
  const tail = await lastEvents(files, after, voided, found !== undefined)
  let written = 0
  let buried = 0
  let keys = 0
  if (found !== undefined) {
    const userFiles: string[] = []
    const graveFiles: string[] = []
    const replay = async (event: ChangeEvent): Promise<void> => {
      const name = `${event.userId}.json`
      if (event.type === 'user.deleted') {
        await dirs.graves.writeFile(
          name,
          toTombstoneJson({ id: event.userId, deletedAt: event.time }),
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
    const chosen = new Set(tail.last.values())
    // Many at once, a bounded number in memory.
    let batch: ChangeEvent[] = []
    const flush = async (): Promise<void> => {
      const running = batch
      batch = []
      await Promise.all(running.map(replay))
    }
    await eachLine(files, (bytes, text) => {
      const id = leadingId(bytes)
      if (id === undefined || !chosen.has(id)) return
      const line = text()
      const event = line === undefined ? undefined : parseEvent(line)
      if (event === undefined) return
      // Once: a damaged copy of the line further on must not be written a second time meanwhile.
      chosen.delete(id)
      batch.push(event)
      return batch.length >= REPLAY_AT_ONCE ? flush() : undefined
    })
    await flush()
    const replayed = await replayKeys({
      files,
      after,
      voided,
      keys: dirs.keys,
      eventsDir: dirs.eventsDir,
      now: dirs.now,
    })
    keys = replayed.keys
    await syncFiles(dirs.users, userFiles)
    await syncFiles(dirs.graves, graveFiles)
    await syncFiles(dirs.keys, replayed.journals)
    await Promise.all([dirs.users.sync(), dirs.graves.sync(), dirs.keys.sync()])
  }
  const through = Math.max(after, tail.highest)
  if (found !== through) await dirs.root.writeFile(CHECKPOINT_FILE, checkpointJson(through))
  return {
    through,
    events: found === undefined ? 0 : tail.events,
    written,
    buried,
    keys,
    checkpoint: found === undefined ? 'missing' : found === 'damaged' ? 'damaged' : 'found',
  }
}

/**
 * The segments that may hold ids past `after`, in order (a segment holds ids from its name's up
 * to the next one's).
 */
function tailFiles(dir: string, after: number): string[] {
  const names = readdirSync(dir)
    .filter((name) => SEGMENT.test(name))
    .sort()
  return names
    .filter((_, at) => {
      const next = names[at + 1]
      return next === undefined || eventIdNumber(next.slice(0, 16)) - 1 > after
    })
    .map((name) => path.join(dir, name))
}

/**
 * Calls `each` with every whole line of these segments, streamed, and a way to read it as text
 * (undefined when it is not valid UTF-8): most lines are skipped by their first bytes alone.
 */
async function eachLine(
  files: readonly string[],
  each: (bytes: Buffer, text: () => string | undefined) => void | Promise<void>,
): Promise<void> {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
  for (const file of files) {
    await readLines(file, (bytes) => each(bytes, () => decodeLine(decoder, bytes)))
  }
}

/** The ids voided in these segments. */
async function readVoids(files: readonly string[]): Promise<Set<number>> {
  const voided = new Set<number>()
  await eachLine(files, (bytes, text) => {
    if (bytes.toString('latin1', 0, VOID_START.length) !== VOID_START) return
    const gone = VOID.exec(text() ?? '')?.[1]
    const id = gone === undefined ? undefined : safeId(gone)
    if (id !== undefined) voided.add(id)
  })
  return voided
}

/**
 * The highest id in these segments and, when `wanted`, each user's last event past `after` that
 * is not voided (its id), and how many such events there are.
 */
async function lastEvents(
  files: readonly string[],
  after: number,
  voided: ReadonlySet<number>,
  wanted: boolean,
): Promise<{ last: Map<string, number>; highest: number; events: number }> {
  const last = new Map<string, number>()
  let highest = 0
  let events = 0
  await eachLine(files, (bytes, text) => {
    // Only lines that begin as eventJson writes them (no void, no key's line): the pass that
    // writes finds its events by this leading id, and a line it would not find is no event.
    const id = leadingId(bytes)
    if (id === undefined) return
    const line = text()
    const head = line === undefined ? undefined : parseEventHead(line)
    if (head === undefined || safeId(head.id) !== id) return
    highest = Math.max(highest, id)
    if (!wanted || id <= after) return
    events += 1
    if (!voided.has(id)) last.set(head.userId, id)
  })
  return { last, highest, events }
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
