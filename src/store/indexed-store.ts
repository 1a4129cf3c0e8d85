import { HttpError } from '../errors.js'
import type { Tombstone } from '../users/stored-user.js'
import { toRecord, type User, type UserRecord } from '../users/user.js'
import { isCanonicalUuid } from '../users/uuid7.js'
import { WriteError } from './atomic-write.js'
import type { ChangeUser, ListPage, ListQuery, Store, StoreHealth } from './store.js'
import { UserIndex } from './user-index.js'

export interface IndexedStoreOptions {
  /** Milliseconds since the epoch, for tombstones (Date.now by default). */
  now?: (() => number) | undefined
}

const HEALTHY: StoreHealth = Object.freeze({ state: 'ok' })

/**
 * What the memory store and the file store share: the index, the tombstones of deleted users, one
 * queue of writers per user, email reservations, and what a failed write means. A subclass says
 * how a record or a tombstone is made durable. Memory follows what the disk shows: it changes
 * after a write resolves, or after one that failed once its rename had happened (WriteError's
 * `applied`), and never otherwise.
 */
export abstract class IndexedStore implements Store {
  protected readonly index = new UserIndex()
  /** Deleted ids and when they were deleted: their tokens stay refused forever (§9). */
  protected readonly tombstones = new Map<string, string>()
  readonly #queues = new Map<string, Promise<unknown>>()
  /** Email keys claimed by writes in flight, so that two writers cannot both take one. */
  readonly #reserved = new Set<string>()
  readonly #now: () => number
  #health: StoreHealth = HEALTHY

  constructor(options: IndexedStoreOptions = {}) {
    this.#now = options.now ?? Date.now
  }

  abstract open(): Promise<void>
  abstract close(): Promise<void>
  /** Makes the record durable; a failure is a WriteError. */
  protected abstract persist(record: UserRecord): Promise<void>
  /** Durably replaces the user by its tombstone; a failure is a WriteError. */
  protected abstract bury(tombstone: Tombstone): Promise<void>

  count(): number {
    return this.index.size
  }

  health(): StoreHealth {
    return this.#health
  }

  get(id: string): Promise<UserRecord | undefined> {
    return Promise.resolve(this.index.get(id))
  }

  getMany(ids: readonly string[]): Promise<UserRecord[]> {
    const found: UserRecord[] = []
    for (const id of ids) {
      const record = this.index.get(id)
      if (record !== undefined) found.push(record)
    }
    return Promise.resolve(found)
  }

  isDeleted(id: string): Promise<boolean> {
    return Promise.resolve(this.tombstones.has(id))
  }

  list(query: ListQuery): Promise<ListPage> {
    return Promise.resolve(this.index.list(query))
  }

  create(user: User, check?: () => void): Promise<UserRecord> {
    // Ids name files in the file store: only canonical UUIDs ever get that far.
    if (!isCanonicalUuid(user.id)) return Promise.reject(new Error(`not a canonical UUID: ${user.id}`))
    return this.#serialise(user.id, () => {
      this.#requireWritable()
      if (this.index.get(user.id) !== undefined || this.tombstones.has(user.id)) {
        throw new Error(`user ${user.id} already exists or existed`)
      }
      check?.()
      return this.#write(toRecord(user), undefined)
    })
  }

  update(id: string, change: ChangeUser): Promise<UserRecord> {
    return this.#serialise(id, () => {
      this.#requireWritable()
      const current = this.#require(id)
      const next = change(current)
      if (next === undefined) return Promise.resolve(current)
      if (next.id !== id) throw new Error(`a change may not alter the id of user ${id}`)
      return this.#write(toRecord(next), current)
    })
  }

  delete(id: string, check?: (current: UserRecord) => void): Promise<void> {
    return this.#serialise(id, async () => {
      this.#requireWritable()
      const current = this.#require(id)
      check?.(current)
      const tombstone = { id, deletedAt: new Date(this.#now()).toISOString() }
      await this.#durably(() => this.bury(tombstone), () => {
        this.index.remove(id)
        this.tombstones.set(id, tombstone.deletedAt)
      })
    })
  }

  /**
   * From now on every write is refused until a restart reloads what the disk holds: after a
   * failed fsync the kernel may have dropped changes it had reported as written, so nothing
   * this process believes about the disk can be trusted ("fsyncgate").
   */
  protected turnReadOnly(reason: string): void {
    this.#health = { state: 'read_only', reason }
  }

  async #write(record: UserRecord, current: UserRecord | undefined): Promise<UserRecord> {
    const claims = record.emailKey !== current?.emailKey
    if (claims) this.#reserve(record)
    try {
      await this.#durably(() => this.persist(record), () => { this.index.put(record) })
      return record
    } finally {
      if (claims) this.#reserved.delete(record.emailKey)
    }
  }

  /** Runs a durable step and applies it to memory when the disk shows it, whether or not it failed. */
  async #durably(step: () => Promise<void>, apply: () => void): Promise<void> {
    try {
      await step()
    } catch (error) {
      if (!(error instanceof WriteError)) throw error
      if (error.applied) apply()
      this.#noteFault(error)
      throw storageUnavailable(error, this.#health)
    }
    apply()
    if (this.#health.state === 'degraded') this.#health = HEALTHY
  }

  #noteFault(error: WriteError): void {
    if (this.#health.state === 'read_only') return
    if (error.fsyncFailed || error.code === 'EIO') {
      this.turnReadOnly(`a write failed at ${error.step} (${error.code ?? 'no errno'})`)
    } else {
      // A full or read-only disk: writes may work again once space is freed or the mount fixed.
      this.#health = { state: 'degraded', reason: `a write failed at ${error.step} (${error.code ?? 'no errno'})` }
    }
  }

  #requireWritable(): void {
    if (this.#health.state === 'read_only') throw storageUnavailable(undefined, this.#health)
  }

  #reserve(record: UserRecord): void {
    const holder = this.index.idOfEmail(record.emailKey)
    if ((holder !== undefined && holder !== record.user.id) || this.#reserved.has(record.emailKey)) {
      throw new HttpError('duplicate_email', 'Another user already has this email.')
    }
    this.#reserved.add(record.emailKey)
  }

  #require(id: string): UserRecord {
    const current = this.index.get(id)
    if (current === undefined) throw new HttpError('not_found', 'There is no user with this id.')
    return current
  }

  /** Runs `task` after every earlier task for the same id has settled. */
  #serialise<T>(id: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#queues.get(id) ?? Promise.resolve()
    const run = previous.then(task, task)
    const settled = run.then(() => undefined, () => undefined)
    this.#queues.set(id, settled)
    void settled.then(() => {
      if (this.#queues.get(id) === settled) this.#queues.delete(id)
    })
    return run
  }
}

/** The one answer to a storage fault: 503, and a detail that says what was kept. */
export function storageUnavailable(cause: WriteError | undefined, health: StoreHealth): HttpError {
  const readOnly = 'the service takes no more writes until it is restarted; reads still work.'
  let detail = 'Storage refused the write (it is full or read-only), so nothing was changed. Try again later.'
  if (cause === undefined && health.state === 'read_only') detail = `Storage failed earlier: ${readOnly}`
  else if (cause === undefined) detail = 'Storage refused the last write (it is full or read-only); new writes are tried as they come.'
  else if (cause.applied) detail = `The change was written but could not be made durable, and ${readOnly} Read it back to see what is kept.`
  else if (health.state === 'read_only') detail = `Storage failed and nothing was changed; ${readOnly}`
  return new HttpError('storage_unavailable', detail, { headers: { 'retry-after': '30' }, cause })
}
