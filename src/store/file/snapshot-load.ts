import { performance } from 'node:perf_hooks'

import type { UserIndex } from '../user-index.js'
import { UserLines } from './snapshot-lines.js'
import { parseTombstone } from './stored-files.js'
import { TURN_MS, type UserFilesContext, yieldToLoop } from './user-files-load.js'
import type { FoundSnapshot, SnapshotMiss } from './users-snapshot.js'

/** Where a tombstone line's id is: `{"id":"<uuid>"`, as the files are written (user lines: UserLines). */
const ID_START = '{"id":"'.length
const ID_END = ID_START + 36

/** Where the snapshot is loaded: the store's memory, and its log. */
export type SnapshotLoad = Pick<UserFilesContext, 'index' | 'tombstones' | 'logger' | 'usersDir'>

/**
 * Loads the users and tombstones from a snapshot taken at open (takeSnapshot), unless it was
 * missed or the replay wrote files after all (`replayed` events: the files are newer). Every
 * line is checked as a user file is; a bad one, two users with one email, or a digest that does
 * not hold leaves memory as it was and says false, as any miss does (logged with its reason):
 * the caller reads the files.
 */
export async function loadSnapshot(
  snapshot: FoundSnapshot | SnapshotMiss,
  replayed: number,
  context: SnapshotLoad,
): Promise<boolean> {
  const started = Date.now()
  let miss: SnapshotMiss | undefined
  if (typeof snapshot === 'string') miss = snapshot
  else if (replayed > 0) miss = 'tail replayed'
  else if (!(await loadLines(snapshot, context))) miss = 'damaged'
  if (miss !== undefined) {
    context.logger.info('the users snapshot was not used; reading every user file', {
      reason: miss,
      usersDir: context.usersDir,
    })
    return false
  }
  context.logger.info('users loaded', {
    users: context.index.size,
    deleted: context.tombstones.size,
    removedTempFiles: 0,
    quarantined: 0,
    ms: Date.now() - started,
    source: 'snapshot',
  })
  return true
}

async function loadLines(snapshot: FoundSnapshot, context: SnapshotLoad): Promise<boolean> {
  const { index, tombstones } = context
  const put: string[] = []
  const end = await putUsers(snapshot.body, snapshot.header.userCount, index, put)
  // Two users with one email leave fewer emails than users (the index's put keeps the last).
  const unique = end !== undefined && index.emails === index.size
  const graves = unique ? parseTombstones(snapshot.body, end, index) : undefined
  if (graves === undefined || !(await snapshot.intact)) {
    // Newest first: each removal is at the end of the index's id arrays.
    for (let at = put.length - 1; at >= 0; at -= 1) index.remove(put[at] ?? '')
    return false
  }
  for (const [id, deletedAt] of graves) tombstones.set(id, deletedAt)
  return true
}

/**
 * Puts the first `count` lines in the index as records (ids strictly ascending, so each goes at
 * the end of the index's arrays), adding each id to `put`; where the next line starts, or
 * undefined at the first line that is not a user as the store writes it (snapshot-lines.ts).
 */
async function putUsers(
  body: string,
  count: number,
  index: UserIndex,
  put: string[],
): Promise<number | undefined> {
  const lines = new UserLines(body)
  let previous = ''
  let turn = performance.now()
  for (let n = 0; n < count; n += 1) {
    const record = lines.next()
    if (record === undefined || record.user.id <= previous) return undefined
    previous = record.user.id
    index.put(record)
    put.push(previous)
    if (performance.now() - turn > TURN_MS) {
      await yieldToLoop()
      turn = performance.now()
    }
  }
  return lines.at
}

/** The tombstone lines from `from` on; undefined when one is bad or a user's. */
function parseTombstones(
  body: string,
  from: number,
  index: UserIndex,
): [string, string][] | undefined {
  let start = from
  const graves: [string, string][] = []
  for (let end = body.indexOf('\n', start); end >= 0; end = body.indexOf('\n', start)) {
    const line = body.slice(start, end)
    start = end + 1
    const id = line.slice(ID_START, ID_END)
    const tombstone = parseTombstone(line, id)
    if (tombstone === undefined || index.get(id) !== undefined) return undefined
    graves.push([id, tombstone.deletedAt])
  }
  return graves
}
