import { randomBytes } from 'node:crypto'
import { open, rename, unlink, type FileHandle } from 'node:fs/promises'
import path from 'node:path'

/**
 * A directory whose file writes are atomic and durable: a temp file in the same directory, opened
 * exclusively, written and fsynced, renamed over the target, then the directory fsynced. Readers
 * see the old file or the new one, never a torn one, and a resolved write survives a power loss.
 */
export class DurableDirectory {
  readonly path: string
  readonly #handle: FileHandle
  #running: Promise<void> | undefined
  #queued: Promise<void> | undefined

  private constructor(dir: string, handle: FileHandle) {
    this.path = dir
    this.#handle = handle
  }

  /** Opens an existing directory; keep one per directory and close it when done. */
  static async open(dir: string): Promise<DurableDirectory> {
    return new DurableDirectory(dir, await open(dir, 'r'))
  }

  async writeFile(name: string, data: string): Promise<void> {
    const target = path.join(this.path, name)
    const temp = path.join(this.path, `.${name}.${randomBytes(6).toString('hex')}.tmp`)
    const file = await open(temp, 'wx', 0o600)
    try {
      await file.writeFile(data, 'utf8')
      await file.sync()
      await file.close()
      await rename(temp, target)
    } catch (error) {
      await file.close().catch(() => undefined)
      await unlink(temp).catch(() => undefined)
      throw error
    }
    await this.sync()
  }

  async removeFile(name: string): Promise<void> {
    await unlink(path.join(this.path, name))
    await this.sync()
  }

  /**
   * Fsyncs the directory. Callers that arrive while an fsync runs share the next one (a group
   * commit): it starts after their rename, so it covers them, and N writers cost about two fsyncs.
   */
  sync(): Promise<void> {
    if (this.#queued !== undefined) return this.#queued
    if (this.#running === undefined) return this.#start()
    const queued = this.#running.catch(() => undefined).then(() => this.#start())
    this.#queued = queued
    return queued
  }

  #start(): Promise<void> {
    this.#queued = undefined
    const run = this.#handle.sync()
    this.#running = run
    void run.catch(() => undefined).then(() => {
      if (this.#running === run) this.#running = undefined
    })
    return run
  }

  close(): Promise<void> {
    return this.#handle.close()
  }
}

/** Writes one file atomically and durably (for files written once, outside a store). */
export async function writeFileAtomic(file: string, data: string): Promise<void> {
  const dir = await DurableDirectory.open(path.dirname(file))
  try {
    await dir.writeFile(path.basename(file), data)
  } finally {
    await dir.close()
  }
}
