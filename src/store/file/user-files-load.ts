import { closeSync, type Dirent, fstatSync, openSync, readdirSync, readSync } from 'node:fs'
import { lstat, unlink } from 'node:fs/promises'
import path from 'node:path'
import { performance } from 'node:perf_hooks'

import { toRecord, type User } from '../../domain/user.js'
import type { Logger } from '../../log/logger.js'
import type { UserIndex } from '../user-index.js'
import type { DurableWriteObserver } from '../write-timing.js'
import { DurableDirectory, makeDurableDirectory } from './atomic-write.js'
import { hasCode } from './errno.js'
import { parseStoredUser, parseTombstone } from './stored-files.js'

const USER_FILE = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.json$/
const TEMP_FILE = /^\..*\.tmp$/
/**
 * Past this, a file is no user's or tombstone's (the largest user, 32 metadata values of 512
 * escaped characters, is about 100 KiB): it is quarantined unread, not read whole into memory.
 */
const MAX_FILE_BYTES = 1024 * 1024
const TOO_LARGE = `the file is larger than any user file (over ${MAX_FILE_BYTES} bytes)`

/** A file that does not belong where it was found, and why. */
interface Misfit {
  readonly name: string
  readonly reason: string
}

/** The file store's directories and the memory the user files are loaded into. */
export interface UserFilesContext {
  readonly usersDir: string
  readonly tombstonesDir: string
  readonly quarantineDir: string
  /** The open users/ and tombstones/ directories (these throw when the store is not open). */
  readonly users: () => DurableDirectory
  readonly graves: () => DurableDirectory
  readonly index: UserIndex
  readonly tombstones: Map<string, string>
  readonly logger: Logger
  /** Told how long the quarantine's moves took to be durable. */
  readonly timings: DurableWriteObserver
  /** Files read between two yields to the event loop. */
  readonly chunk: number
}

/**
 * Reads every user file. Start-up is not the request path: synchronous reads are several times
 * faster than fs/promises for many small files, and yielding between chunks keeps /healthz and
 * /readyz answering while a large directory loads.
 */
export async function loadUserFiles(context: UserFilesContext): Promise<void> {
  const { usersDir, index, tombstones, logger, chunk } = context
  const started = Date.now()
  const badTombstones = await loadTombstones(context)
  const entries = readdirSync(usersDir, { withFileTypes: true })
  const names = entries.filter((entry) => entry.isFile()).map((entry) => entry.name)
  const users: User[] = []
  const bad: Misfit[] = []
  const misplaced = notFiles(entries)
  const temps: string[] = []
  let turn = performance.now()
  for (let i = 0; i < names.length; i += chunk) {
    for (const name of names.slice(i, i + chunk)) {
      // A busy machine makes a chunk slow: /healthz must not wait for a whole one.
      if (performance.now() - turn > TURN_MS) {
        await yieldToLoop()
        turn = performance.now()
      }
      const id = USER_FILE.exec(name)?.[1]
      if (id !== undefined) {
        const text = readSmallFile(path.join(usersDir, name))
        const user = text === undefined ? undefined : parseStoredUser(text, id)
        if (user !== undefined) users.push(user)
        else bad.push({ name, reason: text === undefined ? TOO_LARGE : NOT_A_USER })
      } else if (TEMP_FILE.test(name)) {
        temps.push(name)
      } else {
        logger.warn('ignoring a file that is not a user', {
          file: path.join(usersDir, name),
        })
      }
    }
    await yieldToLoop()
  }
  for (const name of temps) await unlink(path.join(usersDir, name))
  if (temps.length > 0) await context.users().sync()
  // A tombstone beside its user file is a delete that never finished: the user stays.
  for (const user of users) {
    if (tombstones.delete(user.id)) await context.graves().removeFile(`${user.id}.json`)
  }
  const quarantine: Misfit[] = [...bad, ...misplaced]
  // Oldest first, so that of two files with one email the older user keeps it.
  users.sort((a, b) => (a.id < b.id ? -1 : 1))
  for (let i = 0; i < users.length; i += 1) {
    const user = users[i]
    if (user === undefined) continue
    const record = toRecord(user)
    const holder = index.idOfEmail(record.emailKey)
    if (holder === undefined) index.put(record)
    else
      quarantine.push({
        name: `${user.id}.json`,
        reason: `its email is already used by user ${holder}`,
      })
    if (i % chunk === 0) await yieldToLoop()
  }
  await quarantineFiles(context, context.users(), quarantine)
  await quarantineFiles(context, context.graves(), badTombstones)
  logger.info('users loaded', {
    users: index.size,
    deleted: tombstones.size,
    removedTempFiles: temps.length,
    quarantined: quarantine.length + badTombstones.length,
    ms: Date.now() - started,
    source: 'files',
  })
}

/** Reads the tombstones into memory; returns the files that are not tombstones of ours. */
async function loadTombstones(context: UserFilesContext): Promise<Misfit[]> {
  const { tombstonesDir } = context
  const bad: Misfit[] = []
  let temps = 0
  const entries = readdirSync(tombstonesDir, { withFileTypes: true })
  bad.push(...notFiles(entries))
  for (const entry of entries) {
    if (!entry.isFile()) continue
    if (TEMP_FILE.test(entry.name)) {
      await unlink(path.join(tombstonesDir, entry.name))
      temps += 1
      continue
    }
    const id = USER_FILE.exec(entry.name)?.[1]
    const text = id === undefined ? '' : readSmallFile(path.join(tombstonesDir, entry.name))
    const tombstone = id === undefined || text === undefined ? undefined : parseTombstone(text, id)
    if (tombstone === undefined)
      bad.push({
        name: entry.name,
        reason: text === undefined ? TOO_LARGE : 'the file is not a whole, valid tombstone',
      })
    else context.tombstones.set(tombstone.id, tombstone.deletedAt)
  }
  if (temps > 0) await context.graves().sync()
  return bad
}

const NOT_A_USER = 'the file is not a whole, valid user'

/** A file's text, read from one open file; undefined when it is larger than MAX_FILE_BYTES. */
function readSmallFile(file: string): string | undefined {
  const fd = openSync(file, 'r')
  try {
    const { size } = fstatSync(fd)
    if (size > MAX_FILE_BYTES) return undefined
    const buffer = Buffer.allocUnsafe(size)
    let read = 0
    while (read < size) {
      const got = readSync(fd, buffer, read, size - read, read)
      if (got === 0) break
      read += got
    }
    return buffer.toString('utf8', 0, read)
  } finally {
    closeSync(fd)
  }
}

/**
 * The entries named as a user's file (or tombstone) that are not plain files: a symbolic link is
 * never read through (it may lead out of DATA_DIR), and a user skipped without a word would vanish
 * and have its events voided; moved aside instead, they are logged and their events held back.
 */
function notFiles(entries: readonly Dirent[]): Misfit[] {
  return entries
    .filter((entry) => !entry.isFile() && USER_FILE.test(entry.name))
    .map((entry) => ({
      name: entry.name,
      reason: entry.isSymbolicLink()
        ? 'a symbolic link, not a file of the data directory'
        : 'not a plain file',
    }))
}

/** Moves bad files aside, durably, never deleting one, and says so in the log. */
async function quarantineFiles(
  context: UserFilesContext,
  from: DurableDirectory,
  files: readonly Misfit[],
): Promise<void> {
  if (files.length === 0) return
  makeDurableDirectory(context.quarantineDir)
  const to = await DurableDirectory.open(context.quarantineDir, context.timings)
  try {
    for (const { name, reason } of files) {
      const target = await freeName(to.path, name)
      await from.moveOut(name, to, target)
      context.logger.warn('quarantined a file', {
        file: path.join(from.path, name),
        quarantine: path.join(to.path, target),
        reason,
      })
    }
  } finally {
    await to.close()
  }
}

/**
 * The name itself when free in `dir`, else with a time stamp (and a count, when that is taken too:
 * a user's file and its tombstone may go in one millisecond): quarantine never overwrites. lstat,
 * not access: a link quarantined earlier whose target is gone still takes its name.
 */
async function freeName(dir: string, name: string): Promise<string> {
  const stamped = `${name}.${Date.now()}`
  for (let taken = 0; ; taken += 1) {
    const candidate = taken === 0 ? name : taken === 1 ? stamped : `${stamped}.${taken - 1}`
    try {
      await lstat(path.join(dir, candidate))
    } catch (error) {
      if (hasCode(error, 'ENOENT')) return candidate
      throw error
    }
  }
}

/** The longest stretch of files read without letting the event loop serve others. */
export const TURN_MS = 10

export function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}
