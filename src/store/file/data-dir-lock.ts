import { readdirSync } from 'node:fs'
import path from 'node:path'

import { StartError } from '../../domain/errors.js'
import { makeDurableDirectory, syncDirectorySync } from './atomic-write.js'
import { isShortOfResources } from './errno.js'
import {
  blocks,
  closeQuietly,
  createLockFile,
  type Head,
  heldLocks,
  holdsToken,
  isProcessAlive,
  LEGACY_CONTENT,
  LEGACY_NAME,
  listLockFiles,
  newToken,
  parseHead,
  readHead,
  readLock,
  removeIfOurs,
  removeQuietly,
  TEMP_PREFIX,
} from './lock-file.js'
import { BEAT_MS, beat, isOtherNamespace } from './lock-namespace.js'

/** Another live process, or another store in this process, owns the data directory. */
export class LockError extends StartError {
  override name = 'LockError'
}

const MAX_ATTEMPTS = 50

/**
 * Gives up every data directory lock this process holds, at once: for a forced exit, which must
 * not leave a lock file the next start has to take over.
 */
export function releaseHeldLocks(): void {
  for (const lock of [...heldLocks.values()]) lock.release()
}

interface Held {
  readonly file: string
  readonly token: string
  readonly identity: string
  /** The lock file, open for as long as it is held: how another process knows our pid is us. */
  readonly fd: number
  /** Touches the file when asked: how a process of another PID namespace knows we are alive. */
  readonly heartbeat: NodeJS.Timeout
}

/**
 * One process owns a data directory, through a lock file in it (the protocol is in lock-file.ts).
 * Acquiring is synchronous: it runs at start-up, before the server listens.
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
    const token = newToken()
    // Stryker disable next-line EqualityOperator: 50 or 51 attempts give up alike
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      const top = listLockFiles(this.#dir).at(-1)
      // The current lock decides: a start it refuses writes nothing into the directory.
      if (top !== undefined) {
        const reading = readLock(top.file)
        if (reading === 'gone') continue
        if (blocks(reading, top.file)) throw this.#refusal(top.file, reading)
      }
      const file = path.join(this.#dir, `.lock.${(top?.generation ?? 0) + 1}`)
      const linked = createLockFile(this.#dir, file, token)
      if (linked === undefined) continue
      try {
        this.#settle(file, token)
      } catch (error) {
        closeQuietly(linked.fd)
        throw error
      }
      heldLocks.set(token, this)
      const heartbeat = setInterval(beat, BEAT_MS, this.#dir, linked.fd, new Map()).unref()
      this.#held = { file, token, identity: linked.identity, fd: linked.fd, heartbeat }
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
    clearInterval(held.heartbeat)
    heldLocks.delete(held.token)
    const removed = removeIfOurs(held.file, held.token)
    closeQuietly(held.fd)
    return removed
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
    let head: Head | undefined
    try {
      head = readHead(held.file)
    } catch (error) {
      // Short of descriptors (idle connections may hold them all for a while) or memory: no sign
      // of who owns the directory, and the next check reads the file again. Any other error is.
      return isShortOfResources(error)
    }
    const reading = parseHead(head)
    return holdsToken(reading, held.token) && reading.identity === held.identity
  }

  /**
   * Gives our new file up if another lock file has an owner; otherwise removes the stale ones and
   * makes the directory durable (a failure leaves our file, stale once this process is gone).
   */
  #settle(file: string, token: string): void {
    // Stryker disable next-line ArrayDeclaration: a made-up name is no file here, and its quiet removal does nothing
    const stale: string[] = []
    for (const lock of listLockFiles(this.#dir)) {
      if (lock.file === file) continue
      const reading = readLock(lock.file)
      if (blocks(reading, lock.file)) {
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

  #refusal(
    file: string,
    reading: { readonly pid: number; readonly token?: string } | 'garbage',
  ): LockError {
    if (reading === 'garbage') {
      return new LockError(
        `the lock file ${file} was not written by this service (no owner can be read from it); ` +
          'remove it if no process uses this directory',
      )
    }
    const owner = isOtherNamespace(reading.token ?? '')
      ? `a running process of another PID namespace (another container; pid ${reading.pid} there)`
      : reading.pid === process.pid
        ? `another store in this process (pid ${reading.pid})`
        : `another running process (pid ${reading.pid})`
    return new LockError(
      `the data directory ${this.#dir} is already in use by ${owner}; lock file ${file}. ` +
        'Stop that process or point DATA_DIR elsewhere.',
    )
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
