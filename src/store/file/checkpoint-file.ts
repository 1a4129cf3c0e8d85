import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'

import { formatEventId } from '../../domain/event.js'
import type { DurableDirectory } from './atomic-write.js'
import { hasCode, namingFile } from './errno.js'
import { safeId } from './event-segments.js'
import { checkNotSpecial } from './own-files.js'

/** In DATA_DIR: the id of the event log through which every change's files are durable. */
export const CHECKPOINT_FILE = 'checkpoint.json'

/** The temp file of a checkpoint write (DurableDirectory.writeFile's naming). */
const CHECKPOINT_TEMP = /^\.checkpoint\.json\.[0-9a-z]+\.tmp$/

/**
 * Files fsynced at once by a checkpoint: a few, so that their journal commits are shared, and no
 * more than half of libuv's 4 threads, which a slow fsync holds for its whole length: the writes
 * being answered (their log fdatasync, temp files and renames) use the same threads.
 */
const SYNCS_AT_ONCE = 2

/**
 * What the checkpoint file says, or `undefined` when there is none: a new data directory, or one
 * written before the event log was the write-ahead log, where every change made itself durable.
 * A file that cannot be read as one says "replay everything": the whole log is always a correct
 * replay (each user ends at its last event), only a slower one.
 */
export function readCheckpoint(dataDir: string): number | 'damaged' | undefined {
  const file = path.join(dataDir, CHECKPOINT_FILE)
  checkNotSpecial(file)
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    if (hasCode(error, 'ENOENT')) return undefined
    throw namingFile(error, file)
  }
  const match = /^\{"through":"([0-9a-f]{16})"\}\n?$/.exec(text)?.[1]
  const through = match === undefined ? undefined : safeId(match)
  return through ?? 'damaged'
}

/**
 * Removes the temp files of checkpoint writes that a crash cut short (leftover temp files are
 * removed at start: docs/operations.md); each kill during a checkpoint's write would leave one
 * more.
 */
export async function removeCheckpointTemps(root: DurableDirectory): Promise<number> {
  const temps = readdirSync(root.path).filter((name) => CHECKPOINT_TEMP.test(name))
  for (const name of temps) await root.removeFile(name, false)
  if (temps.length > 0) await root.sync()
  return temps.length
}

export function checkpointJson(through: number): string {
  return `${JSON.stringify({ through: formatEventId(through) })}\n`
}

/** Fsyncs these files of `dir`, a few at a time; one that is gone was removed since. */
export async function syncFiles(dir: DurableDirectory, names: Iterable<string>): Promise<void> {
  const queue = [...names]
  const worker = async (): Promise<void> => {
    for (let name = queue.pop(); name !== undefined; name = queue.pop()) await dir.syncFile(name)
  }
  await Promise.all(Array.from({ length: Math.min(SYNCS_AT_ONCE, queue.length) }, worker))
}
