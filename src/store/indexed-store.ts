import { internalFault } from '../domain/errors.js'
import { type ChangeContext, type ChangeEvent, draftEvent } from '../domain/event.js'
import type { Tombstone } from '../domain/tombstone.js'
import { toRecord, type User, type UserRecord } from '../domain/user.js'
import { isCanonicalUuid } from '../domain/uuid7.js'
import { ChangeCommit, type LogEvent } from './change-commit.js'
import { EventJournal } from './feed/journal.js'
import { PerKeyQueue } from './per-key-queue.js'
import type {
  ChangeUser,
  ListPage,
  ListQuery,
  Store,
  StoreCapabilities,
  StoreHealth,
  SubjectState,
} from './store.js'
import { duplicateEmail, duplicateId, notCanonical, userNotFound } from './store-errors.js'
import { checkStorableContext, checkStorableQuery, checkStorableUser } from './store-input.js'
import { UserIndex } from './user-index.js'

export interface IndexedStoreOptions {
  /** Milliseconds since the epoch, for tombstones (Date.now by default). */
  now?: (() => number) | undefined
}

/**
 * What the memory store and the file store share: the index, the tombstones of deleted users, one
 * queue of writers per user, email reservations, and (through ChangeCommit) what a failed write
 * means. A subclass says how a record or a tombstone is made durable. Memory follows what the disk
 * shows: it changes once a write is committed (its event durable, or its file durable when it has
 * no event), or after one that failed once its rename had happened (WriteError's `applied`), and
 * never otherwise.
 */
export abstract class IndexedStore implements Store {
  protected readonly index = new UserIndex()
  /** Deleted ids and when they were deleted: their tokens stay refused forever (§9). */
  protected readonly tombstones = new Map<string, string>()
  readonly #queues = new PerKeyQueue()
  /** Email keys claimed by writes in flight, so that two writers cannot both take one. */
  readonly #reserved = new Set<string>()
  readonly #now: () => number
  /** The change feed (§10): in memory; a subclass may also make each event durable (logEvent). */
  readonly events = new EventJournal()
  readonly #writes = new ChangeCommit(this.events, {
    logEvent: (event) => this.logEvent(event),
    voidEvent: (event) => this.voidEvent(event),
    unwritten: (event, error) => {
      this.unwritten(event, error)
    },
  })

  constructor(options: IndexedStoreOptions = {}) {
    this.#now = options.now ?? Date.now
  }

  abstract readonly capabilities: StoreCapabilities
  abstract open(): Promise<void>
  abstract close(): Promise<void>
  /**
   * Makes the record durable; a failure is a WriteError. What the disk may refuse comes first (a
   * temp file written), then `log()` (its event made durable: the change is committed), and only
   * then may anything show on disk. When `log()` rejects, that rejection is the failure; a step
   * that does not call it leaves it to be called after. `log` is undefined for a change without
   * an event (nothing changed but the version), which no log holds: it must be durable by itself.
   */
  protected abstract persist(record: UserRecord, log: LogEvent | undefined): Promise<void>
  /**
   * Durably replaces the user by its tombstone, in the same order as `persist`: what may be
   * refused, then `log()` (the deletion's event made durable), then the directory changes.
   */
  protected abstract bury(tombstone: Tombstone, log: LogEvent): Promise<void>

  /**
   * Makes an event durable before its change is written (a failure is a WriteError); the memory
   * store keeps events in memory only.
   */
  protected logEvent(_event: ChangeEvent): Promise<void> {
    return Promise.resolve()
  }

  /** Durably marks an event whose change was not written as void (see FileStore). */
  protected voidEvent(_event: ChangeEvent): Promise<void> {
    return Promise.resolve()
  }

  /**
   * A committed change (its event durable) whose file step failed after: it is answered and shown
   * all the same; a subclass says so in its log.
   */
  protected unwritten(_event: ChangeEvent, _error: unknown): void {
    // Nothing on disk to tell about.
  }

  /** Nothing to claim: a subclass that owns a directory takes its lock here. */
  lock(): void {
    // Nothing to claim.
  }

  prepare(): Promise<void> {
    return Promise.resolve()
  }

  count(): number {
    return this.index.size
  }

  health(): StoreHealth {
    return this.#writes.health
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

  subjectOf(id: string): Promise<SubjectState> {
    return Promise.resolve({
      status: this.index.get(id)?.user.status,
      deleted: this.tombstones.has(id),
    })
  }

  list(query: ListQuery): Promise<ListPage> {
    try {
      checkStorableQuery(query)
    } catch (error) {
      return Promise.reject(error)
    }
    return Promise.resolve(this.index.list(query))
  }

  create(user: User, check?: () => void, context?: ChangeContext): Promise<UserRecord> {
    // Ids name files in the file store: only canonical UUIDs ever get that far.
    if (!isCanonicalUuid(user.id)) return Promise.reject(notCanonical(user.id))
    try {
      checkStorableUser(user, undefined)
      checkStorableContext(context)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#queues.run(user.id, () => {
      this.#writes.requireWritable()
      if (this.index.get(user.id) !== undefined || this.tombstones.has(user.id)) {
        throw duplicateId(user.id)
      }
      check?.()
      return this.#write(toRecord(user), undefined, context)
    })
  }

  update(id: string, change: ChangeUser, context?: ChangeContext): Promise<UserRecord> {
    return this.#queues.run(id, () => {
      this.#writes.requireWritable()
      const current = this.#require(id)
      const next = change(current)
      if (next === undefined) return Promise.resolve(current)
      if (next.id !== id) throw internalFault(`a change may not alter the id of user ${id}`)
      checkStorableUser(next, current.user)
      checkStorableContext(context)
      return this.#write(toRecord(next), current, context)
    })
  }

  delete(
    id: string,
    check?: (current: UserRecord) => void,
    context?: ChangeContext,
  ): Promise<void> {
    return this.#queues.run(id, async () => {
      this.#writes.requireWritable()
      const current = this.#require(id)
      check?.(current)
      checkStorableContext(context)
      const tombstone = { id, deletedAt: new Date(this.#now()).toISOString() }
      const draft = draftEvent(
        current.user,
        undefined,
        id,
        tombstone.deletedAt,
        context,
        current.user.version + 1,
      )
      // The tombstone's write is itself a change on disk: it waits for its event.
      await this.#writes.run(
        (log) => this.bury(tombstone, log),
        () => {
          this.index.remove(id)
          this.tombstones.set(id, tombstone.deletedAt)
        },
        draft,
      )
    })
  }

  /**
   * From now on every write is refused until a restart reloads what the disk holds: after a
   * failed fsync the kernel may have dropped changes it had reported as written, so nothing
   * this process believes about the disk can be trusted ("fsyncgate").
   */
  protected turnReadOnly(reason: string): void {
    this.#writes.turnReadOnly(reason)
  }

  async #write(
    record: UserRecord,
    current: UserRecord | undefined,
    context: ChangeContext | undefined,
  ): Promise<UserRecord> {
    const claims = record.emailKey !== current?.emailKey
    if (claims) this.#reserve(record)
    try {
      const draft = draftEvent(
        current?.user,
        record,
        record.user.id,
        new Date(this.#now()).toISOString(),
        context,
      )
      await this.#writes.run(
        (log) => this.persist(record, draft === undefined ? undefined : log),
        () => {
          this.index.put(record)
        },
        draft,
      )
      return record
    } finally {
      if (claims) this.#reserved.delete(record.emailKey)
    }
  }

  #reserve(record: UserRecord): void {
    const holder = this.index.idOfEmail(record.emailKey)
    if (
      (holder !== undefined && holder !== record.user.id) ||
      this.#reserved.has(record.emailKey)
    ) {
      throw duplicateEmail()
    }
    this.#reserved.add(record.emailKey)
  }

  #require(id: string): UserRecord {
    const current = this.index.get(id)
    if (current === undefined) throw userNotFound()
    return current
  }
}
