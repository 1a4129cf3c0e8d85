import { stat } from 'node:fs/promises'

import type { Logger } from '../../log/logger.js'
import type { IndexedState } from '../durability.js'
import type { DataDirLock } from './data-dir-lock.js'

/** Which directory a path names: a replaced or remounted directory has another. */
export interface Place {
  readonly dev: number
  readonly ino: number
}

export async function readPlace(dir: string): Promise<Place> {
  const info = await stat(dir)
  return { dev: info.dev, ino: info.ino }
}

/**
 * Why the directory loaded (`loaded`, at `dir`) is no longer the store's: it is no longer at its
 * path (removed, replaced, remounted) or its lock is gone; undefined while it still is.
 */
export async function lostPlace(
  dir: string,
  loaded: Place,
  lock: DataDirLock,
): Promise<string | undefined> {
  let problem: string | undefined
  try {
    const now = await readPlace(dir)
    if (now.dev !== loaded.dev || now.ino !== loaded.ino)
      problem = 'the data directory was replaced'
  } catch {
    problem = 'the data directory was removed'
  }
  if (problem === undefined && !lock.check())
    problem = "the data directory's lock file was removed or taken"
  return problem
}

export interface PlaceCheck {
  /** The directory whose place is watched (DATA_DIR/users) and what it was when loaded. */
  readonly dir: string
  readonly loaded: Place | undefined
  readonly lock: DataDirLock
  readonly state: Pick<IndexedState, 'health' | 'turnReadOnly'>
  readonly logger: Logger
  readonly dataDir: string
}

/**
 * Turns the store read-only when the directory it loaded is no longer at its path (removed,
 * replaced, remounted) or its lock is gone: another process may own the path by now.
 */
export async function checkPlace(check: PlaceCheck): Promise<void> {
  const { loaded, state } = check
  if (loaded === undefined || state.health().state === 'read_only') return
  const problem = await lostPlace(check.dir, loaded, check.lock)
  if (problem === undefined) return
  state.turnReadOnly(problem)
  check.logger.error('the store turned read-only', { reason: problem, dataDir: check.dataDir })
}
