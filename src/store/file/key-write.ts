import { readdirSync } from 'node:fs'
import { utimes } from 'node:fs/promises'
import path from 'node:path'

import type { KeptKey } from '../../domain/kept-key.js'
import type { DurableDirectory } from './atomic-write.js'
import { keyFileJson, keyFileName } from './key-format.js'

/** A key file's temp file (DurableDirectory.writeFile's naming), left behind by a crash. */
const KEY_TEMP = /^\.[0-9a-f]{64}\.json\.[0-9a-z]+\.tmp$/

/**
 * Writes the key's file in `DATA_DIR/keys` (atomically: temp file and rename), durably or not
 * (the log holds a key kept with its change, and a checkpoint fsyncs it later), and gives it its
 * expiry as its modification time: the sweep finds the files to delete by their times alone, and
 * the time survives a replay (a file written again later still expires when its key does).
 * `json` is the file's text when the caller has made it already (keyFileJson). Returns the file's
 * name.
 */
export async function writeKeyFile(
  dir: DurableDirectory,
  kept: KeptKey,
  durable = false,
  json = keyFileJson(kept),
): Promise<string> {
  const name = keyFileName(kept.subject, kept.key)
  await dir.writeFile(name, json, undefined, durable)
  await setExpiry(dir.path, name, kept.expiresAt)
  return name
}

/** Sets a key file's modification time to its key's expiry; a file gone meanwhile is left so. */
export async function setExpiry(dir: string, name: string, expiresAt: number): Promise<void> {
  const seconds = expiresAt / 1000
  await utimes(path.join(dir, name), seconds, seconds).catch(() => undefined)
}

/** Removes the temp files of key writes a crash cut short (at open, before any write). */
export async function removeKeyTemps(dir: DurableDirectory): Promise<void> {
  const temps = readdirSync(dir.path).filter((name) => KEY_TEMP.test(name))
  for (const name of temps) await dir.removeFile(name, false)
}
