import { opendir, readFile, stat, unlink } from 'node:fs/promises'
import path from 'node:path'

import { isExpired } from '../../domain/kept-key.js'
import { KEY_FILE, parseKeyFile } from './key-format.js'
import { setExpiry } from './key-write.js'

export interface KeySweep {
  /** DATA_DIR/keys */
  readonly dir: string
  readonly now: () => number
  /** Whether a key file is being written now (a key kept again after it expired): left alone. */
  readonly busy: (name: string) => boolean
  /** Told the name of every key file the sweep leaves in place. */
  readonly kept?: (name: string) => void
}

/**
 * Deletes the key files whose keys have expired, and returns how many (undefined when the
 * directory could not be read). A file's modification time
 * is its key's expiry (writeKeyFile), so that a file not yet due is passed over on its `stat`
 * alone; one that is due is read first, and only a key that has expired (or a file that holds no
 * key) is deleted: a file whose time was changed behind the store's back (a copy) gets its
 * expiry back instead. Streamed (opendir): memory does not grow with the files. The deletions are
 * not fsynced: a file a power loss brings back has still expired, and the next sweep deletes it.
 */
export async function sweepKeyFiles(sweep: KeySweep): Promise<number | undefined> {
  let removed = 0
  let dir: Awaited<ReturnType<typeof opendir>>
  try {
    dir = await opendir(sweep.dir)
  } catch {
    return undefined
  }
  for await (const entry of dir) {
    if (!KEY_FILE.test(entry.name)) continue
    if (await sweptOne(sweep, entry.name)) removed += 1
    else sweep.kept?.(entry.name)
  }
  return removed
}

/** Deletes the file `name` when its key has expired; whether it did. */
async function sweptOne(sweep: KeySweep, name: string): Promise<boolean> {
  const file = path.join(sweep.dir, name)
  const due = await stat(file).then(
    (stats) => stats.mtimeMs <= sweep.now(),
    () => false,
  )
  if (!due) return false
  const text = await readFile(file, 'utf8').catch(() => undefined)
  if (text === undefined) return false
  const kept = parseKeyFile(text)
  if (kept !== undefined && !isExpired(kept, sweep.now())) {
    await setExpiry(sweep.dir, name, kept.expiresAt)
    return false
  }
  if (sweep.busy(name)) return false
  return unlink(file).then(
    () => true,
    () => false,
  )
}
