import path from 'node:path'

import type { DurableWriteObserver } from '../write-timing.js'
import { DurableDirectory, makeDurableDirectory } from './atomic-write.js'

/** The directories of a file store's data directory that it writes files in. */
export interface StoreDirs {
  /** DATA_DIR/users: one file per user. */
  readonly users: DurableDirectory
  /** DATA_DIR/tombstones: one file per deleted user. */
  readonly graves: DurableDirectory
  /** DATA_DIR/keys: the journals of kept `Idempotency-Key`s, one per hour of expiry. */
  readonly keys: DurableDirectory
  /** DATA_DIR itself, where the checkpoint file is. */
  readonly root: DurableDirectory
}

/** Makes (durably) and opens the store's directories in `dataDir`. */
export async function openStoreDirs(
  dataDir: string,
  timings: DurableWriteObserver,
): Promise<StoreDirs> {
  const open = async (name: string): Promise<DurableDirectory> => {
    const dir = path.join(dataDir, name)
    makeDurableDirectory(dir)
    return DurableDirectory.open(dir, timings)
  }
  return {
    users: await open('users'),
    graves: await open('tombstones'),
    keys: await open('keys'),
    root: await DurableDirectory.open(dataDir, timings),
  }
}

export async function closeStoreDirs(dirs: StoreDirs | undefined): Promise<void> {
  if (dirs === undefined) return
  await Promise.all([dirs.users.close(), dirs.graves.close(), dirs.keys.close(), dirs.root.close()])
}
