import { internalFault } from '../domain/errors.js'
import { type ChangeContext, type ChangeEvent, draftEvent } from '../domain/event.js'
import type { Tombstone } from '../domain/tombstone.js'
import { toRecord, type User, type UserRecord } from '../domain/user.js'
import { isCanonicalUuid } from '../domain/uuid7.js'
import { EventJournal } from './feed/journal.js'
import { WriteError } from './file/atomic-write.js'
import { PerKeyQueue } from './per-key-queue.js'
import { storageUnavailable } from './storage-unavailable.js'
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

const HEALTHY: StoreHealth = Object.freeze({ state: 'ok' })

/** The event of a change that has none: nothing to wait for. */
const LOGGED: Promise<void> = Promise.resolve()

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
  readonly #queues = new PerKeyQueue()
  /** Email keys claimed by writes in flight, so that two writers cannot both take one. */
  readonly #reserved = new Set<string>()
  readonly #now: () => number
  #health: StoreHealth = HEALTHY
  /** The change feed (§10): in memory; a subclass may also make each event durable (logEvent). */
  readonly events = new EventJournal()

  constructor(options: IndexedStoreOptions = {}) {
    this.#now = options.now ?? Date.now
  }

  abstract readonly capabilities: StoreCapabilities
  abstract open(): Promise<void>
  abstract close(): Promise<void>
  /**
   * Makes the record durable; a failure is a WriteError. Nothing may show on disk before `logged`
   * (its event made durable) resolves; the work before that may overlap it. When `logged` rejects,
   * that rejection is the failure.
   */
  protected abstract persist(record: UserRecord, logged: Promise<void>): Promise<void>
  /** Durably replaces the user by its tombstone; a failure is a WriteError. */
  protected abstract bury(tombstone: Tombstone): Promise<void>

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
      this.#requireWritable()
      if (this.index.get(user.id) !== undefined || this.tombstones.has(user.id)) {
        throw duplicateId(user.id)
      }
      check?.()
      return this.#write(toRecord(user), undefined, context)
    })
  }

  update(id: string, change: ChangeUser, context?: ChangeContext): Promise<UserRecord> {
    return this.#queues.run(id, () => {
      this.#requireWritable()
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
      this.#requireWritable()
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
      await this.#durably(
        (logged) => logged.then(() => this.bury(tombstone)),
        () => {
          this.index.remove(id)
          this.tombstones.set(id, tombstone.deletedAt)
        },
        draft === undefined ? undefined : this.events.assign(draft),
      )
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
      const event = draft === undefined ? undefined : this.events.assign(draft)
      await this.#durably(
        (logged) => this.persist(record, logged),
        () => {
          this.index.put(record)
        },
        event,
      )
      return record
    } finally {
      if (claims) this.#reserved.delete(record.emailKey)
    }
  }

  /**
   * Runs a durable step and applies it to memory when the disk shows it, whether or not it failed.
   * Its event, if any, is durable before the step changes anything on disk (the step waits for
   * `logged`; a temp file may be written and synced meanwhile, so the two syncs overlap): after a
   * crash the only possible mismatch is an event whose change is missing, which the file store
   * drops at start. An event whose change failed here is voided; the feed shows an event once its
   * change is in memory.
   */
  async #durably(
    step: (logged: Promise<void>) => Promise<void>,
    apply: () => void,
    event?: ChangeEvent,
  ): Promise<void> {
    const logged = event === undefined ? LOGGED : this.#logged(event)
    // A step that fails before it waits for the event leaves the rejection to us: never unhandled.
    logged.catch(() => undefined)
    try {
      await step(logged)
      await logged
    } catch (error) {
      const applied = error instanceof WriteError && error.applied
      if (event !== undefined && applied) this.events.commit(event)
      else if (event !== undefined) await this.#voided(event)
      if (!(error instanceof WriteError)) throw error
      if (error.applied) apply()
      this.#noteFault(error)
      throw storageUnavailable(error, this.#health)
    }
    apply()
    if (event !== undefined) this.events.commit(event)
    if (this.#health.state === 'degraded') this.#health = HEALTHY
  }

  /** The event made durable; a failure never counts as the change applied. */
  async #logged(event: ChangeEvent): Promise<void> {
    try {
      await this.logEvent(event)
    } catch (error) {
      if (error instanceof WriteError && error.applied)
        throw new WriteError(error.step, error.cause, false)
      throw error
    }
  }

  /**
   * Voids an event whose change was not made. When even that fails, the store takes no more
   * writes: at the next start the event, whose change is not on disk, is dropped.
   */
  async #voided(event: ChangeEvent): Promise<void> {
    this.events.void(event)
    try {
      await this.voidEvent(event)
    } catch {
      this.turnReadOnly('an event whose change failed could not be voided')
    }
  }

  #noteFault(error: WriteError): void {
    if (this.#health.state === 'read_only') return
    if (error.fsyncFailed || error.code === 'EIO') {
      this.turnReadOnly(`a write failed at ${error.step} (${error.code ?? 'no errno'})`)
    } else {
      // A full or read-only disk: writes may work again once space is freed or the mount fixed.
      this.#health = {
        state: 'degraded',
        reason: `a write failed at ${error.step} (${error.code ?? 'no errno'})`,
      }
    }
  }

  #requireWritable(): void {
    if (this.#health.state === 'read_only') throw storageUnavailable(undefined, this.#health)
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
