import { randomBytes } from 'node:crypto'
import {
  closeSync,
  existsSync,
  fstatSync,
  fsyncSync,
  linkSync,
  openSync,
  readdirSync,
  readSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'

import { hasCode } from './errno.js'
import { isBeating, isOtherNamespace, NAMESPACE_MARK, namespacePrefix } from './lock-namespace.js'

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
 * restarted container). A pid also outlives its process across a reboot (a power cut): the pid
 * of a lock written before it may be another program's now. So an owner keeps its lock file open
 * for as long as it holds it, and says so with a token that starts with HOLDER_MARK; such an owner
 * is live only if /proc shows its pid holding that file open. A token without the mark (written
 * by a release from before the mark) is judged by its pid alone. An owner in another PID namespace
 * (another container on the same volume) is judged instead by whether it touches its lock file
 * when asked (lock-namespace.ts); the tokens written now start with NAMESPACE_MARK and that
 * namespace, and are held open as HOLDER_MARK's are.
 */

const LOCK_NAME = /^\.lock\.([1-9][0-9]{0,14})$/
const CONTENT = /^([1-9][0-9]{0,9}) ([0-9a-f]{32})\n$/
/** The lock file of version 0.1.0, and what it held: a pid. */
export const LEGACY_NAME = '.lock'
export const LEGACY_CONTENT = /^([1-9][0-9]{0,9})\n?$/
/** The temp files a lock file is written under before it is linked into place. */
export const TEMP_PREFIX = '.lock-tmp.'
/**
 * The start of the token of an owner that holds its lock file open. Eight fixed hex digits, so
 * that a random token of an earlier release starts so once in 2^32, and 96 random bits after.
 */
export const HOLDER_MARK = 'fdfdfdfd'
// The longest content we write is 44 bytes; reading a few more shows a longer file is not ours.
const READ_BYTES = 64

/**
 * The locks held in this process, by their tokens (the only way to tell two stores of one pid
 * apart), each able to give itself up (a forced exit gives them all up).
 */
export const heldLocks = new Map<string, { release(): boolean }>()

export interface Owner {
  readonly pid: number
  readonly token: string
  /** Device and inode of the file read: a data directory replaced by a copy has another one. */
  readonly identity: string
}

/** What a lock file says: an owner, `gone` (removed meanwhile) or `garbage` (not ours). */
export type Reading = Owner | 'gone' | 'garbage'

export interface LockFile {
  readonly generation: number
  readonly file: string
}

/** A new owner's token: NAMESPACE_MARK and our PID namespace, then 64 random bits. */
export function newToken(): string {
  return namespacePrefix() + randomBytes(8).toString('hex')
}

/** A lock file linked into place: its identity, and the descriptor held open while it is ours. */
export interface Linked {
  readonly identity: string
  readonly fd: number
}

/** The lock files in a directory, lowest generation first. */
export function listLockFiles(dir: string): LockFile[] {
  const locks: LockFile[] = []
  for (const name of readdirSync(dir)) {
    const match = LOCK_NAME.exec(name)
    if (match !== null) locks.push({ generation: Number(match[1]), file: path.join(dir, name) })
  }
  return locks.sort((a, b) => a.generation - b.generation)
}

/**
 * Links a fully written lock file holding our pid and token, still open (the file is held open
 * from before anyone can read it: no moment shows its owner without it); undefined when the name
 * is taken, so the caller looks again. The caller closes the descriptor when it gives the lock up.
 */
export function createLockFile(dir: string, file: string, token: string): Linked | undefined {
  const temp = path.join(dir, `${TEMP_PREFIX}${token}`)
  const linked = writeDurably(temp, `${process.pid} ${token}\n`)
  if (linked === undefined) return undefined
  try {
    linkSync(temp, file)
    return linked
  } catch (error) {
    closeSync(linked.fd)
    // ENOENT: a holder's clean-up swept our temp file; it is written again next time round.
    if (hasCode(error, 'EEXIST') || hasCode(error, 'ENOENT')) return undefined
    throw error
  } finally {
    removeQuietly(temp)
  }
}

/** Whether the lock file `file` stops us: a live owner, or a file we cannot read an owner from. */
export function blocks(reading: Reading, file: string): reading is Owner | 'garbage' {
  return typeof reading === 'object' ? isLive(reading, file) : reading === 'garbage'
}

/** Whether a reading is our lock: it holds this token. */
export function holdsToken(reading: Reading, token: string): reading is Owner {
  // Stryker disable next-line ConditionalExpression: a string reading has no token, so the comparison alone refuses it; the typeof is for the type checker
  return typeof reading === 'object' && reading.token === token
}

/** What a lock file says now. */
export function readLock(file: string): Reading {
  let head: Head | undefined
  try {
    head = readHead(file)
  } catch {
    return 'garbage'
  }
  return parseHead(head)
}

/** What a lock file read (readHead) says. */
export function parseHead(head: Head | undefined): Reading {
  if (head === undefined) return 'gone'
  const match = CONTENT.exec(head.text)
  if (match === null) return 'garbage'
  return { pid: Number(match[1]), token: String(match[2]), identity: head.identity }
}

export interface Head {
  readonly text: string
  readonly identity: string
}

/** The first bytes of a file and its identity, read from one open file; undefined when it does not exist. */
export function readHead(file: string): Head | undefined {
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

function isLive(owner: Owner, file: string): boolean {
  if (isOtherNamespace(owner.token)) return isBeating(file)
  if (owner.pid === process.pid) return heldLocks.has(owner.token)
  if (!isProcessAlive(owner.pid)) return false
  const holder = owner.token.startsWith(HOLDER_MARK) || owner.token.startsWith(NAMESPACE_MARK)
  return !holder || holdsOpen(owner.pid, owner.identity)
}

/**
 * Whether process `pid` has the file of `identity` open, read from /proc/<pid>/fd. Where that
 * cannot be read (no /proc, a process of another user) the answer is yes: a lock is never taken
 * on a guess. A folder gone while /proc is there is a process gone since kill(pid, 0).
 */
export function holdsOpen(pid: number, identity: string, proc = '/proc'): boolean {
  const dir = path.join(proc, String(pid), 'fd')
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch (error) {
    return !(hasCode(error, 'ENOENT') && existsSync(path.join(proc, 'self', 'fd')))
  }
  for (const name of names) {
    try {
      if (identityOf(statSync(path.join(dir, name), { bigint: true })) === identity) return true
    } catch {
      // A descriptor closed since the listing: not the lock file, which its owner keeps open.
    }
  }
  return false
}

/**
 * `kill(pid, 0)`: EPERM means the process exists but belongs to someone else. The pids come from
 * patterns that allow no 0, sign or more than 10 digits; Node refuses NaN and pids past 32 bits.
 */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return hasCode(error, 'EPERM')
  }
}

/**
 * Writes a new file (mode 0600) and fsyncs it; returns its identity and a descriptor that holds it
 * open for reading only (one open for writing would keep its file system from being remounted
 * read-only while the service runs).
 */
function writeDurably(file: string, text: string): Linked | undefined {
  const fd = openSync(file, 'wx', 0o600)
  try {
    writeFileSync(fd, text)
    fsyncSync(fd)
    return { identity: identify(fd), fd: openSync(file, 'r') }
  } catch (error) {
    // ENOENT: a holder's clean-up swept the temp file before it was held (as for the link below).
    if (hasCode(error, 'ENOENT')) return undefined
    removeQuietly(file)
    throw error
  } finally {
    closeSync(fd)
  }
}

function identify(fd: number): string {
  // Stryker disable next-line ObjectLiteral,BooleanLiteral: device and inode numbers below 2^53 print alike; bigint keeps larger ones (XFS, NFS) exact
  return identityOf(fstatSync(fd, { bigint: true }))
}

/** A file's identity: its device and inode, exact (bigint: XFS and NFS use large ones). */
function identityOf({ dev, ino }: { dev: bigint; ino: bigint }): string {
  return `${dev}:${ino}`
}

/** Removes a lock file that still holds our token; returns whether it did. */
export function removeIfOurs(file: string, token: string): boolean {
  if (!holdsToken(readLock(file), token)) return false
  try {
    unlinkSync(file)
    return true
  } catch {
    return false
  }
}

/** Closes a descriptor; one already closed is no failure (a release never throws). */
export function closeQuietly(fd: number): void {
  try {
    closeSync(fd)
  } catch {
    // EBADF: closed already; nothing else can fail in close(2) on a file we only read.
  }
}

/** Removes a file if it can: one already gone, or a directory we cannot write, is no failure. */
export function removeQuietly(file: string): void {
  try {
    unlinkSync(file)
  } catch {
    // Best effort: a file already gone, or a directory we cannot write, changes nothing here.
  }
}
