import { HttpError } from '../errors.js'
import { toRecord, type User, type UserRecord } from '../users/user.js'
import { isCanonicalUuid } from '../users/uuid7.js'
import type { ChangeUser, ListPage, ListQuery, Store } from './store.js'
import { UserIndex } from './user-index.js'

/**
 * What the memory store and the file store share: the index, one queue of writers per user, and
 * email reservations. A subclass says how a record is made durable; the index changes only after
 * that resolves, so a failed write leaves memory as it was.
 */
export abstract class IndexedStore implements Store {
  protected readonly index = new UserIndex()
  readonly #queues = new Map<string, Promise<unknown>>()
  /** Email keys claimed by writes in flight, so that two writers cannot both take one. */
  readonly #reserved = new Set<string>()

  abstract open(): Promise<void>
  abstract close(): Promise<void>
  /** Makes the record durable. */
  protected abstract persist(record: UserRecord): Promise<void>
  /** Durably forgets the user. */
  protected abstract unpersist(id: string): Promise<void>

  get(id: string): Promise<UserRecord | undefined> {
    return Promise.resolve(this.index.get(id))
  }

  list(query: ListQuery): Promise<ListPage> {
    return Promise.resolve(this.index.list(query))
  }

  create(user: User): Promise<UserRecord> {
    // Ids name files in the file store: only canonical UUIDs ever get that far.
    if (!isCanonicalUuid(user.id)) return Promise.reject(new Error(`not a canonical UUID: ${user.id}`))
    return this.#serialise(user.id, () => {
      if (this.index.get(user.id) !== undefined) throw new Error(`user ${user.id} already exists`)
      return this.#write(toRecord(user), undefined)
    })
  }

  update(id: string, change: ChangeUser): Promise<UserRecord> {
    return this.#serialise(id, () => {
      const current = this.#require(id)
      const next = change(current)
      if (next === undefined) return Promise.resolve(current)
      if (next.id !== id) throw new Error(`a change may not alter the id of user ${id}`)
      return this.#write(toRecord(next), current)
    })
  }

  delete(id: string, check?: (current: UserRecord) => void): Promise<void> {
    return this.#serialise(id, async () => {
      const current = this.#require(id)
      check?.(current)
      await this.unpersist(id)
      this.index.remove(id)
    })
  }

  async #write(record: UserRecord, current: UserRecord | undefined): Promise<UserRecord> {
    const claims = record.emailKey !== current?.emailKey
    if (claims) this.#reserve(record)
    try {
      await this.persist(record)
      this.index.put(record)
      return record
    } finally {
      if (claims) this.#reserved.delete(record.emailKey)
    }
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
