import { readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'

/** Another live process owns the data directory. */
export class LockError extends Error {
  override name = 'LockError'
}

/**
 * One process owns a data directory: `DATA_DIR/.lock` holds the owner's pid. A lock whose process
 * is gone (killed, crashed) is stale and taken over. Runs at start-up only, so it may block.
 */
export class DataDirLock {
  readonly file: string
  #held = false

  constructor(dataDir: string) {
    this.file = path.join(dataDir, '.lock')
  }

  get held(): boolean {
    return this.#held
  }

  acquire(): void {
    if (this.#held) return
    for (let attempt = 0; attempt < 3; attempt += 1) {
      try {
        writeFileSync(this.file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 })
        this.#held = true
        return
      } catch (error) {
        if (!hasCode(error, 'EEXIST')) throw error
      }
      const owner = this.#readOwner()
      // Our own pid in the file means a previous run with the same pid (pid 1 in a container).
      if (owner !== undefined && owner !== process.pid && isAlive(owner)) {
        throw new LockError(
          `the data directory is already in use by another running process (pid ${owner}); ` +
          `lock file ${this.file}. Stop that process or point DATA_DIR elsewhere.`,
        )
      }
      try {
        unlinkSync(this.file)
      } catch (error) {
        if (!hasCode(error, 'ENOENT')) throw error
      }
    }
    throw new LockError(`could not take the lock file ${this.file}: another process keeps taking it`)
  }

  release(): void {
    if (!this.#held) return
    this.#held = false
    if (this.#readOwner() !== process.pid) return
    try {
      unlinkSync(this.file)
    } catch (error) {
      if (!hasCode(error, 'ENOENT')) throw error
    }
  }

  #readOwner(): number | undefined {
    try {
      const pid = Number.parseInt(readFileSync(this.file, 'utf8'), 10)
      return Number.isInteger(pid) && pid > 0 ? pid : undefined
    } catch {
      return undefined
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return hasCode(error, 'EPERM')
  }
}

export function hasCode(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code
}
