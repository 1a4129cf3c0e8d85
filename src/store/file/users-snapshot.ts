import { createHash, webcrypto } from 'node:crypto'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'

import { formatEventId } from '../../domain/event.js'
import type { UserRecord } from '../../domain/user.js'
import type { DurableDirectory } from './atomic-write.js'
import { readCheckpoint } from './checkpoint-file.js'
import { hasCode, namingFile } from './errno.js'
import { safeId } from './event-segments.js'
import { checkNotSpecial } from './own-files.js'
import { toTombstoneJson } from './stored-files.js'

/**
 * In DATA_DIR: every user and tombstone in one file, written at a clean stop and read (then
 * removed) at the next start instead of `users/*.json` when nothing changed since
 * (docs/operations.md, the snapshot). The user files stay the source of truth.
 */
export const SNAPSHOT_FILE = 'snapshot'

/** The temp file of a snapshot write (DurableDirectory.writeFile's naming). */
const SNAPSHOT_TEMP = /^\.snapshot\.[0-9a-z]+\.tmp$/

/**
 * The layout's number: a release that writes user lines otherwise (another field order) changes
 * it, so that a snapshot of an older release is never read as its own.
 */
const FORMAT = 1

/**
 * sha1 here detects damage (a torn or flipped file), not tampering: the fastest sound one here
 * (30 MB: sha1 33 ms, md5 46 ms, sha256 52 ms).
 */
const DIGEST = 'sha1'
const TRAILER = /^\{"sha1":"([0-9a-f]{40})"\}\n$/

/**
 * Which directory it is and when it last changed. A name added, removed or renamed into place
 * changes mtime and ctime; ctime cannot be set back (`touch`, `cp -a` and `rsync` keep mtime only),
 * and a copied or restored directory is another inode.
 */
export interface DirStamp {
  readonly dev: string
  readonly ino: string
  readonly mtimeNs: string
  readonly ctimeNs: string
}

/** The snapshot's first line. */
export interface SnapshotHeader {
  readonly format: number
  /** The checkpoint it was written at: checkpoint.json must still say exactly this. */
  readonly through: string
  readonly users: DirStamp
  readonly tombstones: DirStamp
  readonly userCount: number
  readonly tombstoneCount: number
}

export function dirStamp(dir: string): DirStamp {
  const info = statSync(dir, { bigint: true })
  return {
    dev: String(info.dev),
    ino: String(info.ino),
    mtimeNs: String(info.mtimeNs),
    ctimeNs: String(info.ctimeNs),
  }
}

function sameStamp(a: DirStamp, b: DirStamp): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs
}

/** What a snapshot's text is made of, taken in one turn: the lines it holds are fixed then. */
export interface SnapshotContent {
  readonly header: Omit<SnapshotHeader, 'userCount' | 'tombstoneCount' | 'format'>
  /** Each user's record JSON (the bytes of its file). */
  readonly users: readonly string[]
  /** Each tombstone's text. */
  readonly tombstones: readonly string[]
}

/** Takes the lines of a snapshot from memory now (references only: no text is copied). */
export function snapshotContent(
  header: SnapshotContent['header'],
  records: Iterable<UserRecord>,
  tombstones: ReadonlyMap<string, string>,
): SnapshotContent {
  const users: string[] = []
  for (const record of records) users.push(record.json)
  const graves: string[] = []
  for (const [id, deletedAt] of tombstones) graves.push(toTombstoneJson({ id, deletedAt }))
  return { header, users, tombstones: graves }
}

/** The text a snapshot is handed to the file in, about this many characters at a time. */
const CHUNK_CHARS = 64 * 1024

/**
 * The snapshot's text: the header, one line per user, one per tombstone, then the digest of
 * everything before it. Made a chunk at a time as the file takes it, the digest as it goes, so
 * that a stop never holds the whole text: a service in a small heap (docs/embedding.md) would not
 * survive a copy of every user at once. `written.bytes` counts what was made.
 */
export function* snapshotChunks(
  content: SnapshotContent,
  written: { bytes: number } = { bytes: 0 },
): Generator<string> {
  const head: SnapshotHeader = {
    format: FORMAT,
    ...content.header,
    userCount: content.users.length,
    tombstoneCount: content.tombstones.length,
  }
  const digest = createHash(DIGEST)
  let chunk = `${JSON.stringify(head)}\n`
  const take = (): string => {
    const taken = chunk
    digest.update(taken, 'utf8')
    written.bytes += Buffer.byteLength(taken)
    chunk = ''
    return taken
  }
  for (const lines of [content.users, content.tombstones]) {
    for (const line of lines) {
      chunk += `${line}\n`
      if (chunk.length >= CHUNK_CHARS) yield take()
    }
  }
  if (chunk !== '') yield take()
  const trailer = `${JSON.stringify({ [DIGEST]: digest.digest('hex') })}\n`
  written.bytes += Buffer.byteLength(trailer)
  yield trailer
}

/** A snapshot that matches the directories and the checkpoint as found, not yet parsed. */
export interface FoundSnapshot {
  readonly header: SnapshotHeader
  readonly through: number
  /** The user lines then the tombstone lines, each ending in a newline. */
  readonly body: string
  /**
   * Whether the digest holds: computed on libuv's thread pool while the lines are parsed, and
   * awaited before the load is kept.
   */
  readonly intact: Promise<boolean>
}

/** Why a start reads the user files instead of the snapshot. */
export type SnapshotMiss =
  | 'missing'
  | 'damaged'
  | 'older than the files'
  | 'checkpoint moved'
  | 'tail replayed'

/**
 * Takes the snapshot at open: reads it, removes it (durably: a stale snapshot never outlives the
 * start that found it) with any temp file a cut write left, and tells whether it still matches
 * `checkpoint.json` and the directories. Before the replay, which may change both.
 */
export async function takeSnapshot(
  root: DurableDirectory,
  usersDir: string,
  tombstonesDir: string,
): Promise<FoundSnapshot | SnapshotMiss> {
  const temps = readdirSync(root.path).filter((name) => SNAPSHOT_TEMP.test(name))
  for (const name of temps) await root.removeFile(name, false)
  checkNotSpecial(path.join(root.path, SNAPSHOT_FILE))
  let bytes: Buffer | undefined
  try {
    bytes = readFileSync(path.join(root.path, SNAPSHOT_FILE))
  } catch (error) {
    if (!hasCode(error, 'ENOENT')) throw namingFile(error, path.join(root.path, SNAPSHOT_FILE))
  }
  if (bytes !== undefined) await root.removeFile(SNAPSHOT_FILE, false)
  if (bytes !== undefined || temps.length > 0) await root.sync()
  if (bytes === undefined) return 'missing'
  const found = checkedSnapshot(bytes)
  if (found === undefined) return 'damaged'
  if (readCheckpoint(root.path) !== found.through) return 'checkpoint moved'
  const users = dirStamp(usersDir)
  const tombstones = dirStamp(tombstonesDir)
  if (!sameStamp(users, found.header.users) || !sameStamp(tombstones, found.header.tombstones))
    return 'older than the files'
  return found
}

/** The snapshot when its header and line count hold (its digest checked meanwhile). */
function checkedSnapshot(bytes: Buffer): FoundSnapshot | undefined {
  if (bytes.length < 2 || bytes[bytes.length - 1] !== 0x0a) return undefined
  const trailerAt = bytes.lastIndexOf(0x0a, bytes.length - 2) + 1
  const digest = TRAILER.exec(bytes.toString('latin1', trailerAt))?.[1]
  if (digest === undefined) return undefined
  const content = bytes.subarray(0, trailerAt)
  const headerEnd = content.indexOf(0x0a)
  if (headerEnd < 0) return undefined
  const header = parseHeader(content.toString('utf8', 0, headerEnd))
  const through = header === undefined ? undefined : safeId(header.through)
  if (header === undefined || through === undefined) return undefined
  const body = content.toString('utf8', headerEnd + 1)
  if (countLines(body) !== header.userCount + header.tombstoneCount) return undefined
  const intact = webcrypto.subtle.digest('SHA-1', content).then(
    (sum) => Buffer.from(sum).toString('hex') === digest,
    () => false,
  )
  return { header, through, body, intact }
}

function parseHeader(text: string): SnapshotHeader | undefined {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof value !== 'object' || value === null) return undefined
  const header = value as Partial<Record<keyof SnapshotHeader, unknown>>
  const { format, through, users, tombstones, userCount, tombstoneCount } = header
  if (format !== FORMAT || typeof through !== 'string') return undefined
  if (!isCount(userCount) || !isCount(tombstoneCount)) return undefined
  if (!isStamp(users) || !isStamp(tombstones)) return undefined
  return { format, through, users, tombstones, userCount, tombstoneCount }
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

function isStamp(value: unknown): value is DirStamp {
  if (typeof value !== 'object' || value === null) return false
  const stamp = value as Partial<Record<keyof DirStamp, unknown>>
  return ['dev', 'ino', 'mtimeNs', 'ctimeNs'].every(
    (key) => typeof stamp[key as keyof DirStamp] === 'string',
  )
}

function countLines(text: string): number {
  let lines = 0
  for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) lines += 1
  return lines
}

/** The header's `through` for a checkpoint id. */
export function throughText(through: number): string {
  return formatEventId(through)
}
