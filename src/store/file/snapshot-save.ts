import { performance } from 'node:perf_hooks'

import type { UserRecord } from '../../domain/user.js'
import type { Logger } from '../../log/logger.js'
import type { DurableDirectory } from './atomic-write.js'
import {
  type DirStamp,
  dirStamp,
  SNAPSHOT_FILE,
  snapshotChunks,
  snapshotContent,
  throughText,
} from './users-snapshot.js'

/**
 * How long after a directory's last change its stamps are taken: kernel time stamps are coarse
 * (a few ms), and a change after the snapshot must get a ctime of its own, never the recorded one.
 */
const SETTLE_MS = 20

export interface SnapshotSave {
  /** The data directory, where the snapshot goes. */
  readonly root: DurableDirectory
  readonly usersDir: string
  readonly tombstonesDir: string
  readonly logger: Logger
  /**
   * Whether memory is what the files hold and all of it durable (no change running, the last
   * checkpoint through the log's newest event, the store writable): asked just before the text
   * is made from `records` and `tombstones`, in the same turn.
   */
  readonly clean: () => boolean
  /** The checkpoint id the files are durable through. */
  readonly through: number
  readonly records: () => Iterable<UserRecord>
  readonly tombstones: ReadonlyMap<string, string>
}

/**
 * Writes the snapshot at a clean stop, atomically and durably (temp, fsync, rename, directory
 * fsync), stamped with the user and tombstone directories as they are. Never throws: a failure,
 * or a change of a directory meanwhile, leaves no snapshot (and the next start reads the files).
 */
export async function saveSnapshot(save: SnapshotSave): Promise<void> {
  const { root, logger } = save
  const started = performance.now()
  try {
    if (save.clean()) await settle([save.usersDir, save.tombstonesDir])
    if (!save.clean()) {
      logger.info('no users snapshot: the store is not clean at stop', {})
      return
    }
    const users = dirStamp(save.usersDir)
    const tombstones = dirStamp(save.tombstonesDir)
    const header = { through: throughText(save.through), users, tombstones }
    const written = { bytes: 0 }
    const content = snapshotContent(header, save.records(), save.tombstones)
    await root.writeFile(SNAPSHOT_FILE, snapshotChunks(content, written))
    if (!unchanged(save.usersDir, users) || !unchanged(save.tombstonesDir, tombstones)) {
      await root.removeFile(SNAPSHOT_FILE)
      logger.info('no users snapshot: the user files changed while it was written', {})
      return
    }
    logger.info('users snapshot written', {
      file: `${root.path}/${SNAPSHOT_FILE}`,
      bytes: written.bytes,
      ms: Math.round(performance.now() - started),
    })
  } catch (error) {
    // A rename whose directory fsync failed must not be found by the next start.
    await root.removeFile(SNAPSHOT_FILE, false).catch(() => undefined)
    logger.warn('could not write the users snapshot; the next start reads every user file', {
      error: String(error),
    })
  }
}

/** Waits until each directory's last change is SETTLE_MS old (at most SETTLE_MS). */
async function settle(dirs: readonly string[]): Promise<void> {
  const now = BigInt(Date.now()) * 1_000_000n
  const age = Math.min(
    ...dirs.map((dir) => Number((now - BigInt(dirStamp(dir).ctimeNs)) / 1_000_000n)),
  )
  if (age >= SETTLE_MS) return
  const wait = age < 0 ? SETTLE_MS : SETTLE_MS - age
  await new Promise((resolve) => setTimeout(resolve, wait))
}

function unchanged(dir: string, stamp: DirStamp): boolean {
  const now = dirStamp(dir)
  return now.ctimeNs === stamp.ctimeNs && now.mtimeNs === stamp.mtimeNs && now.ino === stamp.ino
}
