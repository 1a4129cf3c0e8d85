import { mkdirSync, readFileSync, readdirSync } from 'node:fs'
import { access, mkdir, rename, unlink } from 'node:fs/promises'
import path from 'node:path'

import { silentLogger, type Logger } from '../logger.js'
import { parseStoredUser } from '../users/stored-user.js'
import { toRecord, type User, type UserRecord } from '../users/user.js'
import { DurableDirectory } from './atomic-write.js'
import { DataDirLock, hasCode } from './data-dir-lock.js'
import { IndexedStore } from './indexed-store.js'

export interface FileStoreOptions {
  dataDir: string
  logger?: Logger
  /** Files read between two yields to the event loop while loading (default 2000). */
  loadChunk?: number
}

const USER_FILE = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.json$/
const TEMP_FILE = /^\..*\.tmp$/

/**
 * The default store: one JSON file per user in `DATA_DIR/users/`, written atomically and durably,
 * and an index in memory loaded at open. It owns the data directory through a lock file.
 */
export class FileStore extends IndexedStore {
  readonly dataDir: string
  readonly usersDir: string
  readonly quarantineDir: string
  readonly #lock: DataDirLock
  readonly #logger: Logger
  readonly #chunk: number
  #dir: DurableDirectory | undefined

  constructor(options: FileStoreOptions) {
    super()
    this.dataDir = path.resolve(options.dataDir)
    this.usersDir = path.join(this.dataDir, 'users')
    this.quarantineDir = path.join(this.dataDir, 'quarantine')
    this.#lock = new DataDirLock(this.dataDir)
    this.#logger = options.logger ?? silentLogger
    this.#chunk = options.loadChunk ?? 2000
  }

  /**
   * Takes the data directory's lock, or throws LockError. Call it before listening, so that a
   * second process refuses to start before it answers anything; open() calls it too.
   */
  lock(): void {
    // Synchronous on purpose: the lock is taken before the server listens.
    mkdirSync(this.dataDir, { recursive: true, mode: 0o700 })
    this.#lock.acquire()
  }

  async open(): Promise<void> {
    this.lock()
    await mkdir(this.usersDir, { recursive: true, mode: 0o700 })
    this.#dir = await DurableDirectory.open(this.usersDir)
    await this.#load()
  }

  async close(): Promise<void> {
    const dir = this.#dir
    this.#dir = undefined
    await dir?.close()
    this.#lock.release()
  }

  protected persist(record: UserRecord): Promise<void> {
    return this.#directory().writeFile(`${record.user.id}.json`, record.json)
  }

  protected unpersist(id: string): Promise<void> {
    return this.#directory().removeFile(`${id}.json`)
  }

  #directory(): DurableDirectory {
    if (this.#dir === undefined) throw new Error('the file store is not open')
    return this.#dir
  }

  /**
   * Reads every user file. Start-up is not the request path: synchronous reads are several times
   * faster than fs/promises for many small files, and yielding between chunks keeps /healthz and
   * /readyz answering while a large directory loads.
   */
  async #load(): Promise<void> {
    const started = Date.now()
    const names = readdirSync(this.usersDir, { withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => entry.name)
    const users: User[] = []
    const bad: string[] = []
    const temps: string[] = []
    for (let i = 0; i < names.length; i += this.#chunk) {
      for (const name of names.slice(i, i + this.#chunk)) {
        const id = USER_FILE.exec(name)?.[1]
        if (id !== undefined) {
          const user = parseStoredUser(readFileSync(path.join(this.usersDir, name), 'utf8'), id)
          if (user === undefined) bad.push(name)
          else users.push(user)
        } else if (TEMP_FILE.test(name)) {
          temps.push(name)
        } else {
          this.#logger.warn('ignoring a file that is not a user', { file: path.join(this.usersDir, name) })
        }
      }
      await yieldToLoop()
    }
    for (const name of temps) await unlink(path.join(this.usersDir, name))
    for (const name of bad) await this.#quarantine(name, 'the file is not a whole, valid user')
    // Oldest first, so that of two files with one email the older user keeps it.
    users.sort((a, b) => (a.id < b.id ? -1 : 1))
    for (let i = 0; i < users.length; i += 1) {
      const user = users[i]
      if (user === undefined) continue
      const record = toRecord(user)
      const holder = this.index.idOfEmail(record.emailKey)
      if (holder === undefined) this.index.put(record)
      else await this.#quarantine(`${user.id}.json`, `its email is already used by user ${holder}`)
      if (i % this.#chunk === 0) await yieldToLoop()
    }
    if (temps.length > 0) await this.#directory().sync()
    this.#logger.info('users loaded', {
      users: this.index.size, removedTempFiles: temps.length, quarantined: bad.length, ms: Date.now() - started,
    })
  }

  /** Moves a bad file aside, never deleting it, and says so in the log. */
  async #quarantine(name: string, reason: string): Promise<void> {
    await mkdir(this.quarantineDir, { recursive: true, mode: 0o700 })
    const from = path.join(this.usersDir, name)
    const to = await freeName(path.join(this.quarantineDir, name))
    await rename(from, to)
    await this.#directory().sync()
    this.#logger.warn('quarantined a user file', { file: from, quarantine: to, reason })
  }
}

/** The target itself when free, else the target with a time stamp: quarantine never overwrites. */
async function freeName(target: string): Promise<string> {
  try {
    await access(target)
  } catch (error) {
    if (hasCode(error, 'ENOENT')) return target
    throw error
  }
  return `${target}.${Date.now()}`
}

function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}
