import { randomBytes } from 'node:crypto'
import {
  closeSync,
  fstatSync,
  fsyncSync,
  linkSync,
  openSync,
  readdirSync,
  readSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'

import { StartError } from '../../domain/errors.js'
import { makeDurableDirectory, syncDirectorySync } from './atomic-write.js'

/** Another live process, or another store in this process, owns the data directory. */
export class LockError extends StartError {
  override name = 'LockError'
}

/*
 * The protocol. Lock files are `DATA_DIR/.lock.<n>`, each holding `<pid> <token>\n`; the one with
 * the highest n (the generation) is the current lock. A lock file is written and fsynced under a
 * private temp name and then hard-linked into place: link fails with EEXIST when the name exists,
 * so a contested slot goes to exactly one process and nobody ever sees a lock file empty or
 * half-written. A stale lock is never deleted and re-created (the race of 0.1.0): it is taken over
 * by linking the next generation, so everyone who found `.lock.<n>` stale races for `.lock.<n+1>`
 * and all but one get EEXIST and read the winner's lock next time round.
 *
 * After its link, a process lists the directory again and gives up (removing its file) if any
 * other lock file has a live owner. Of two processes that both linked a file, the later one's
 * check sees the earlier file, which only its own owner removes, so at most one of them goes on.
 * Both may give up in one corner (a slow process re-creates a generation a holder had already
 * cleaned away), which is safe. The one that goes on removes the stale generations.
 *
 * Live means `kill(pid, 0)` succeeds (or EPERM). Our own pid is live only with the token of a lock
 * held in this process: with another token it is an earlier run that had our pid (pid 1 in a
 * restarted container).
 */

const LOCK_NAME = /^\.lock\.([1-9][0-9]{0,14})$/
const CONTENT = /^([1-9][0-9]{0,9}) ([0-9a-f]{32})\n$/
const LEGACY_CONTENT = /^([1-9][0-9]{0,9})\n?$/
const LEGACY_NAME = '.lock'
const TEMP_PREFIX = '.lock-tmp.'
const MAX_ATTEMPTS = 50
// The longest content we write is 44 bytes; reading a few more shows a longer file is not ours.
const READ_BYTES = 64

/** Tokens of the locks held in this process (the only way to tell two stores of one pid apart). */
const heldTokens = new Set<string>()

interface Owner {
  readonly pid: number
  readonly token: string
  /** Device and inode of the file read: a data directory replaced by a copy has another one. */
  readonly identity: string
}

/** What a lock file says: an owner, `gone` (removed meanwhile) or `garbage` (not ours). */
type Reading = Owner | 'gone' | 'garbage'

interface LockFile {
  readonly generation: number
  readonly file: string
}

interface Held {
  readonly file: string
  readonly token: string
  readonly identity: string
}

/**
 * One process owns a data directory, through a lock file in it (see the protocol above). Acquiring
 * is synchronous: it runs at start-up, before the server listens.
 */
export class DataDirLock {
  readonly #dir: string
  #held: Held | undefined
  // The last file taken, still named after release (a failed removal is logged with it).
  #file: string | undefined

  constructor(dataDir: string) {
    this.#dir = dataDir
  }

  /** Our lock file once acquired; before that, the pattern of lock file names. */
  get file(): string {
    return this.#file ?? path.join(this.#dir, '.lock.<n>')
  }

  get held(): boolean {
    return this.#held !== undefined
  }

  /** Takes the lock, or throws LockError naming the owner. A no-op while held. */
  acquire(): void {
    if (this.#held !== undefined) return
    this.#clearLegacy()
    const token = randomBytes(16).toString('hex')
    // Stryker disable next-line EqualityOperator: 50 or 51 attempts give up alike
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      const top = this.#list().at(-1)
      // The current lock decides: a start it refuses writes nothing into the directory.
      if (top !== undefined) {
        const reading = readLock(top.file)
        if (reading === 'gone') continue
        if (blocks(reading)) throw this.#refusal(top.file, reading)
      }
      const file = path.join(this.#dir, `.lock.${(top?.generation ?? 0) + 1}`)
      const identity = this.#create(file, token)
      if (identity === undefined) continue
      this.#settle(file, token)
      heldTokens.add(token)
      this.#held = { file, token, identity }
      this.#file = file
      return
    }
    throw new LockError(
      `could not take the lock of the data directory ${this.#dir}: other processes keep taking it`,
    )
  }

  /**
   * Gives the lock up: removes our lock file if it still holds our token. Never throws, as the
   * directory may be read-only or gone by now; returns whether the file was removed.
   */
  release(): boolean {
    const held = this.#held
    if (held === undefined) return false
    this.#held = undefined
    heldTokens.delete(held.token)
    return removeIfOurs(held.file, held.token)
  }

  /**
   * True while our lock file is in place: the same file, still holding our token. A process that
   * takes the lock over (having found our pid dead) removes it. Other lock files are no sign: a
   * late starter may link one for a moment before its settle step makes it give up. Cheap enough
   * for a watchdog to call every second.
   */
  check(): boolean {
    const held = this.#held
    if (held === undefined) return false
    const reading = readLock(held.file)
    return holdsToken(reading, held.token) && reading.identity === held.identity
  }

  /**
   * Links a fully written lock file and returns its identity; undefined when the name is taken, so
   * the caller looks again.
   */
  #create(file: string, token: string): string | undefined {
    const temp = path.join(this.#dir, `${TEMP_PREFIX}${token}`)
    const identity = writeDurably(temp, `${process.pid} ${token}\n`)
    try {
      linkSync(temp, file)
      return identity
    } catch (error) {
      // ENOENT: a holder's clean-up swept our temp file; it is written again next time round.
      if (hasCode(error, 'EEXIST') || hasCode(error, 'ENOENT')) return undefined
      throw error
    } finally {
      removeQuietly(temp)
    }
  }

  /**
   * Gives our new file up if another lock file has an owner; otherwise removes the stale ones and
   * makes the directory durable (a failure leaves our file, stale once this process is gone).
   */
  #settle(file: string, token: string): void {
    // Stryker disable next-line ArrayDeclaration: a made-up name is no file here, and its quiet removal does nothing
    const stale: string[] = []
    for (const lock of this.#list()) {
      if (lock.file === file) continue
      const reading = readLock(lock.file)
      if (blocks(reading)) {
        removeIfOurs(file, token)
        throw this.#refusal(lock.file, reading)
      }
      // A file gone meanwhile is removed again, quietly.
      stale.push(lock.file)
    }
    for (const name of readdirSync(this.#dir)) {
      // A live racer's temp file may go too: its link then fails with ENOENT and it looks again.
      if (name.startsWith(TEMP_PREFIX)) stale.push(path.join(this.#dir, name))
    }
    for (const staleFile of stale) removeQuietly(staleFile)
    syncDirectorySync(this.#dir)
  }

  /** The `.lock` of version 0.1.0: refused while its process lives, otherwise removed. */
  #clearLegacy(): void {
    const file = path.join(this.#dir, LEGACY_NAME)
    let text: string | undefined
    // Stryker disable BlockStatement: what cannot be read here is a directory (or, not as root, an unreadable file), which the quiet unlink below leaves alone
    try {
      // Stryker disable next-line OptionalChaining: with no legacy file the TypeError is caught below, and there is nothing to remove either way
      text = readHead(file)?.text
    } catch {
      return // not a file 0.1.0 could have written (a directory, say): none of our business
    }
    // Stryker restore BlockStatement
    // Stryker disable next-line StringLiteral: no pid is read from a text without digits either way
    const pid = Number(LEGACY_CONTENT.exec(text ?? '')?.[1])
    if (pid !== process.pid && isProcessAlive(pid)) throw this.#refusal(file, { pid })
    removeQuietly(file)
  }

  #refusal(file: string, reading: { readonly pid: number } | 'garbage'): LockError {
    if (reading === 'garbage') {
      return new LockError(
        `the lock file ${file} was not written by this service (no owner can be read from it); ` +
          'remove it if no process uses this directory',
      )
    }
    const owner =
      reading.pid === process.pid
        ? `another store in this process (pid ${reading.pid})`
        : `another running process (pid ${reading.pid})`
    return new LockError(
      `the data directory ${this.#dir} is already in use by ${owner}; lock file ${file}. ` +
        'Stop that process or point DATA_DIR elsewhere.',
    )
  }

  /** The lock files, lowest generation first. */
  #list(): LockFile[] {
    const locks: LockFile[] = []
    for (const name of readdirSync(this.#dir)) {
      const match = LOCK_NAME.exec(name)
      if (match !== null)
        locks.push({ generation: Number(match[1]), file: path.join(this.#dir, name) })
    }
    return locks.sort((a, b) => a.generation - b.generation)
  }
}

export function hasCode(error: unknown, code: string): boolean {
  return (Object(error) as { code?: unknown }).code === code
}

/** Whether a lock file stops us: a live owner, or a file we cannot read an owner from. */
function blocks(reading: Reading): reading is Owner | 'garbage' {
  return typeof reading === 'object' ? isLive(reading) : reading === 'garbage'
}

function holdsToken(reading: Reading, token: string): reading is Owner {
  // Stryker disable next-line ConditionalExpression: a string reading has no token, so the comparison alone refuses it; the typeof is for the type checker
  return typeof reading === 'object' && reading.token === token
}

function readLock(file: string): Reading {
  let head: Head | undefined
  try {
    head = readHead(file)
  } catch {
    return 'garbage'
  }
  if (head === undefined) return 'gone'
  const match = CONTENT.exec(head.text)
  if (match === null) return 'garbage'
  return { pid: Number(match[1]), token: String(match[2]), identity: head.identity }
}

interface Head {
  readonly text: string
  readonly identity: string
}

/** The first bytes of a file and its identity, read from one open file; undefined when it does not exist. */
function readHead(file: string): Head | undefined {
  let fd: number
  try {
    fd = openSync(file, 'r')
  } catch (error) {
    if (hasCode(error, 'ENOENT')) return undefined
    throw error
  }
  try {
    const buffer = Buffer.alloc(READ_BYTES)
    const text = buffer.toString('latin1', 0, readSync(fd, buffer, 0, READ_BYTES, 0))
    return { text, identity: identify(fd) }
  } finally {
    closeSync(fd)
  }
}

function isLive(owner: Owner): boolean {
  if (owner.pid === process.pid) return heldTokens.has(owner.token)
  return isProcessAlive(owner.pid)
}

/**
 * `kill(pid, 0)`: EPERM means the process exists but belongs to someone else. The pids come from
 * patterns that allow no 0, sign or more than 10 digits; Node refuses NaN and pids past 32 bits.
 */
function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return hasCode(error, 'EPERM')
  }
}

/** Writes a new file (mode 0600) and fsyncs it; returns its identity (device and inode). */
function writeDurably(file: string, text: string): string {
  const fd = openSync(file, 'wx', 0o600)
  try {
    writeFileSync(fd, text)
    fsyncSync(fd)
    return identify(fd)
  } catch (error) {
    removeQuietly(file)
    throw error
  } finally {
    closeSync(fd)
  }
}

function identify(fd: number): string {
  // Stryker disable next-line ObjectLiteral,BooleanLiteral: device and inode numbers below 2^53 print alike; bigint keeps larger ones (XFS, NFS) exact
  const { dev, ino } = fstatSync(fd, { bigint: true })
  return `${dev}:${ino}`
}

function removeIfOurs(file: string, token: string): boolean {
  if (!holdsToken(readLock(file), token)) return false
  try {
    unlinkSync(file)
    return true
  } catch {
    return false
  }
}

function removeQuietly(file: string): void {
  try {
    unlinkSync(file)
  } catch {
    // Best effort: a file already gone, or a directory we cannot write, changes nothing here.
  }
}

/**
 * Takes a data directory's lock for the whole process (creating the directory when missing), or
 * throws LockError. The file store takes its own; a process whose store keeps no files there (a
 * database) calls this before it writes the first-start secret, and releases the lock at exit.
 */
export function lockDataDir(dataDir: string): DataDirLock {
  makeDurableDirectory(dataDir)
  const lock = new DataDirLock(dataDir)
  lock.acquire()
  return lock
}
