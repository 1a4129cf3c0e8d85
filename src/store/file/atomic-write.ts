import { randomBytes } from 'node:crypto'
import fs, { closeSync, fsyncSync, mkdirSync, openSync } from 'node:fs'
import { type FileHandle, open, rename, unlink } from 'node:fs/promises'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { promisify } from 'node:util'

import { WriteError, type WriteStep } from '../write-error.js'
import { type DurableWriteObserver, reportDurableWrite, UNOBSERVED } from '../write-timing.js'
import { hasCode } from './errno.js'

/** A rename that waits for nothing. */
const READY = (): Promise<void> => Promise.resolve()

// The callback forms, promisified: a FileHandle per file costs the event loop more.
const writeNewFile = promisify(fs.writeFile)
const renameFile = promisify(fs.rename)

/** What a write's `beforeRename` rejected with, told apart from the write's own failures. */
class GateClosed {
  constructor(readonly reason: unknown) {}
}

/** Runs a write's `beforeRename`, its failure wrapped so as to be told apart from the write's. */
function gate(beforeRename: () => Promise<void>): Promise<void> {
  return beforeRename().catch((error: unknown) => Promise.reject(new GateClosed(error)))
}

/**
 * A directory whose file writes are atomic and durable: a temp file in the same directory, opened
 * exclusively, written and fsynced, renamed over the target, then the directory fsynced. Readers
 * see the old file or the new one, never a torn one, and a resolved write survives a power loss.
 * Every failure is a WriteError naming its step.
 */
export class DurableDirectory {
  readonly path: string
  readonly #handle: FileHandle
  readonly #timings: DurableWriteObserver
  #running: Promise<void> | undefined
  #queued: Promise<void> | undefined
  /** Temp names: random per directory opened, then counted (no CSPRNG call per write). */
  readonly #tempPrefix = randomBytes(6).toString('hex')
  #temps = 0

  private constructor(dir: string, handle: FileHandle, timings: DurableWriteObserver) {
    this.path = dir
    this.#handle = handle
    this.#timings = timings
  }

  /**
   * Opens an existing directory; keep one per directory and close it when done. `timings` is told
   * how long each write and fsync took.
   */
  static async open(
    dir: string,
    timings: DurableWriteObserver = UNOBSERVED,
  ): Promise<DurableDirectory> {
    return new DurableDirectory(dir, await open(dir, 'r'), timings)
  }

  /**
   * Writes a file durably: a temp file written and fsynced, renamed over the target, and the
   * directory fsynced. `beforeRename` is called once the temp file is written (a full disk has
   * refused it by then) and the rename waits for it; when it rejects, the temp file is removed
   * and its rejection is what this throws.
   * `durable: false` leaves out both fsyncs: the file is still replaced atomically, and a
   * write-ahead log that holds its content makes it durable (see Checkpoint).
   * `data` may come in pieces (an iterable of strings), written as they come: a large file is then
   * never whole in memory.
   */
  async writeFile(
    name: string,
    data: string | Iterable<string>,
    beforeRename: () => Promise<void> = READY,
    durable = true,
  ): Promise<void> {
    const target = path.join(this.path, name)
    this.#temps += 1
    const temp = path.join(this.path, `.${name}.${this.#tempPrefix}${this.#temps.toString(36)}.tmp`)
    if (!durable)
      return this.#writeUnsynced(
        temp,
        target,
        typeof data === 'string' ? data : [...data].join(''),
        beforeRename,
      )
    let file: FileHandle | undefined
    let step: WriteStep = 'write'
    const started = performance.now()
    try {
      file = await open(temp, 'wx', 0o600)
      // Stryker disable next-line StringLiteral: FileHandle.writeFile takes an empty encoding name as UTF-8
      if (typeof data === 'string') await file.writeFile(data, 'utf8')
      // Each writeFile writes on from where the one before stopped.
      else for (const chunk of data) await file.writeFile(chunk, 'utf8')
      step = 'file-sync'
      const syncStarted = performance.now()
      await file.sync()
      reportDurableWrite(this.#timings, 'file-sync', this.path, syncStarted)
      // Stryker disable next-line StringLiteral: only a close() after a good fsync fails here, which no test can provoke; the name shows only in the message
      step = 'write'
      await file.close()
      file = undefined
      step = 'rename'
      await gate(beforeRename)
      await rename(temp, target)
    } catch (error) {
      await file?.close().catch(() => undefined)
      await unlink(temp).catch(() => undefined)
      reportDurableWrite(this.#timings, 'write', this.path, started)
      if (error instanceof GateClosed) throw error.reason
      throw new WriteError(step, error)
    }
    try {
      await this.#syncOrThrow()
    } finally {
      reportDurableWrite(this.#timings, 'write', this.path, started)
    }
  }

  /**
   * The temp file written and renamed, no fsync, through node:fs's callbacks: a FileHandle per
   * file costs the event loop more (an import writes thousands of files a second).
   */
  async #writeUnsynced(
    temp: string,
    target: string,
    data: string,
    beforeRename: () => Promise<void>,
  ): Promise<void> {
    const started = performance.now()
    let step: WriteStep = 'write'
    try {
      await writeNewFile(temp, data, { flag: 'wx', mode: 0o600 })
      step = 'rename'
      await gate(beforeRename)
      await renameFile(temp, target)
    } catch (error) {
      await unlink(temp).catch(() => undefined)
      if (error instanceof GateClosed) throw error.reason
      throw new WriteError(step, error)
    } finally {
      reportDurableWrite(this.#timings, 'write', this.path, started)
    }
  }

  /**
   * Removes a file durably: unlink, then the directory fsync (shared with concurrent writers).
   * `durable: false` leaves the fsync to a checkpoint.
   */
  async removeFile(name: string, durable = true): Promise<void> {
    try {
      await unlink(path.join(this.path, name))
    } catch (error) {
      throw new WriteError('rename', error)
    }
    if (durable) await this.#syncOrThrow()
  }

  /**
   * Fsyncs a file of this directory by name (a checkpoint's step, through node:fs's callbacks: it
   * runs for every file written); false when it is gone (removed since: whatever removed it is in
   * the log, or made durable by itself).
   */
  syncFile(name: string): Promise<boolean> {
    return new Promise((resolve, reject) => {
      fs.open(path.join(this.path, name), 'r', (opened, fd) => {
        if (opened !== null) {
          if (hasCode(opened, 'ENOENT')) resolve(false)
          // Not an fsync that failed: nothing the kernel held was dropped.
          else reject(new WriteError('write', opened))
          return
        }
        const started = performance.now()
        fs.fsync(fd, (synced) => {
          fs.close(fd, () => {
            if (synced !== null) {
              reject(new WriteError('file-sync', synced))
              return
            }
            reportDurableWrite(this.#timings, 'file-sync', this.path, started)
            resolve(true)
          })
        })
      })
    })
  }

  /** Moves a file of this directory into another one, durably in both (rename, two fsyncs). */
  async moveOut(name: string, to: DurableDirectory, toName: string): Promise<void> {
    try {
      await rename(path.join(this.path, name), path.join(to.path, toName))
    } catch (error) {
      throw new WriteError('rename', error)
    }
    await Promise.all([this.#syncOrThrow(), to.#syncOrThrow()])
  }

  /** Fsyncs the directory: after renames and unlinks, and after a recovery at start. */
  async sync(): Promise<void> {
    await this.#syncOrThrow()
  }

  async #syncOrThrow(): Promise<void> {
    try {
      await this.#groupSync()
    } catch (error) {
      throw new WriteError('dir-sync', error)
    }
  }

  /**
   * Callers that arrive while an fsync runs share the next one (a group commit): it starts after
   * their rename, so it covers them, and N writers cost about two fsyncs.
   */
  #groupSync(): Promise<void> {
    if (this.#queued !== undefined) return this.#queued
    if (this.#running === undefined) return this.#start()
    const queued = this.#running.catch(() => undefined).then(() => this.#start())
    this.#queued = queued
    return queued
  }

  #start(): Promise<void> {
    this.#queued = undefined
    const started = performance.now()
    const run = this.#handle.sync()
    this.#running = run
    void run
      .catch(() => undefined)
      .then(() => {
        reportDurableWrite(this.#timings, 'dir-sync', this.path, started)
        // Stryker disable next-line ConditionalExpression,EqualityOperator: always true (this callback is registered before any queued start, so it runs first); never clearing only delays the next start by a microtask or two
        if (this.#running === run) this.#running = undefined
      })
    return run
  }

  close(): Promise<void> {
    return this.#handle.close()
  }
}

/**
 * Creates a directory (and its missing parents) so that the creation itself survives a power
 * loss: the parent of every directory made here is fsynced. Returns whether anything was made.
 * Blocking: it runs at start-up, before the lock is taken or anything is served.
 */
export function makeDurableDirectory(dir: string): boolean {
  const first = mkdirSync(dir, { recursive: true, mode: 0o700 })
  if (first === undefined) return false
  for (let made = path.resolve(dir); ; made = path.dirname(made)) {
    syncDirectorySync(path.dirname(made))
    if (made === path.resolve(first)) return true
  }
}

/** Fsyncs one directory by path, blocking: for start-up and for steps that must not interleave. */
export function syncDirectorySync(dir: string): void {
  const fd = openSync(dir, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * Writes one file atomically and durably, blocking (for a file written once at start, outside a
 * store): no turn of the event loop comes between the temp file's creation and the rename, so a
 * stop signal's handler finds either nothing written or the file in place, never a temp file.
 */
export function writeFileAtomicSync(file: string, data: string): void {
  const temp = `${path.dirname(file)}/.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`
  let step: WriteStep = 'write'
  let fd: number | undefined
  try {
    fd = openSync(temp, 'wx', 0o600)
    fs.writeFileSync(fd, data, 'utf8')
    step = 'file-sync'
    fsyncSync(fd)
    step = 'write'
    closeSync(fd)
    fd = undefined
    step = 'rename'
    fs.renameSync(temp, file)
  } catch (error) {
    if (fd !== undefined) closeSync(fd)
    fs.rmSync(temp, { force: true })
    throw new WriteError(step, error)
  }
  try {
    syncDirectorySync(path.dirname(file))
  } catch (error) {
    throw new WriteError('dir-sync', error)
  }
}
