import { internalFault } from '../domain/errors.js'
import { type ChangeContext, draftEvent } from '../domain/event.js'
import { toRecord, type User, type UserRecord } from '../domain/user.js'
import { isCanonicalUuid } from '../domain/uuid7.js'
import { ChangeCommit } from './change-commit.js'
import type { Durability } from './durability.js'
import { EventJournal } from './feed/journal.js'
import type { KeptKeys } from './kept-keys.js'
import { PerKeyQueue } from './per-key-queue.js'
import type {
  ChangeUser,
  ListPage,
  ListQuery,
  Store,
  StoreCapabilities,
  StoreHealth,
  SubjectRead,
  SubjectState,
} from './store.js'
import { duplicateEmail, duplicateId, notCanonical, userNotFound } from './store-errors.js'
import { checkStorableContext, checkStorableQuery, checkStorableUser } from './store-input.js'
import { UserIndex } from './user-index.js'
import type { WebhookStore } from './webhook-store.js'

export interface IndexedStoreOptions {
  /** Milliseconds since the epoch, for tombstones (Date.now by default). */
  now?: (() => number) | undefined
}

/**
 * What the memory store and the file store share: the index, the tombstones of deleted users, one
 * queue of writers per user, email reservations, and (through ChangeCommit) what a failed write
 * means. How a record or a tombstone is made durable is the Durability value it is built with
 * (store/durability.ts). Memory follows what the disk shows: it changes once a write is committed
 * (its event durable, or its file durable when it has no event), or after one that failed once
 * its rename had happened (WriteError's `applied`), and never otherwise.
 */
export class IndexedStore implements Store {
  readonly #index = new UserIndex()
  /** Deleted ids and when they were deleted: their tokens stay refused forever. */
  readonly #tombstones = new Map<string, string>()
  readonly #queues = new PerKeyQueue()
  /** Email keys claimed by writes in flight, so that two writers cannot both take one. */
  readonly #reserved = new Set<string>()
  readonly #now: () => number
  readonly #durability: Durability
  readonly capabilities: StoreCapabilities
  /** The change feed (docs/events.md): in memory; the durability may also keep each event. */
  readonly events = new EventJournal()
  readonly #writes: ChangeCommit
  readonly keys: KeptKeys
  readonly webhooks: WebhookStore

  constructor(durability: Durability, options: IndexedStoreOptions = {}) {
    this.#now = options.now ?? Date.now
    this.#durability = durability
    this.capabilities = durability.capabilities
    this.webhooks = durability.webhooks
    this.#writes = new ChangeCommit(this.events, durability)
    this.keys = keptThrough(durability.keys, this.#writes)
    durability.attach({
      index: this.#index,
      tombstones: this.#tombstones,
      events: this.events,
      health: () => this.#writes.health,
      turnReadOnly: (reason) => {
        this.#writes.turnReadOnly(reason)
      },
    })
  }

  lock(): void {
    this.#durability.lock()
  }

  prepare(): Promise<void> {
    return Promise.resolve()
  }

  open(): Promise<void> {
    return this.#durability.open()
  }

  close(): Promise<void> {
    return this.#durability.close()
  }

  count(): number {
    return this.#index.size
  }

  /** Memory has no upkeep in files: the file store overrides it. */
  pauseUpkeep(_paused: () => boolean): void {}

  health(): StoreHealth {
    return this.#writes.health
  }

  get(id: string): Promise<UserRecord | undefined> {
    return Promise.resolve(this.#index.get(id))
  }

  getMany(ids: readonly string[]): Promise<UserRecord[]> {
    const found: UserRecord[] = []
    for (const id of ids) {
      const record = this.#index.get(id)
      if (record !== undefined) found.push(record)
    }
    return Promise.resolve(found)
  }

  isDeleted(id: string): Promise<boolean> {
    return Promise.resolve(this.#tombstones.has(id))
  }

  subjectOf(id: string): Promise<SubjectState> {
    return Promise.resolve(this.#subject(id))
  }

  getAs(id: string, subject: string): Promise<SubjectRead> {
    return Promise.resolve({ record: this.#index.get(id), subject: this.#subject(subject) })
  }

  #subject(id: string): SubjectState {
    const user = this.#index.get(id)?.user
    return {
      status: user?.status,
      deleted: this.#tombstones.has(id),
      tokensValidAfter: user?.tokensValidAfter,
    }
  }

  list(query: ListQuery): Promise<ListPage> {
    try {
      checkStorableQuery(query)
    } catch (error) {
      return Promise.reject(error)
    }
    return Promise.resolve(this.#index.list(query))
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
      if (this.#index.get(user.id) !== undefined || this.#tombstones.has(user.id)) {
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
        (log) => this.#durability.bury(tombstone, log),
        () => {
          this.#index.remove(id)
          this.#tombstones.set(id, tombstone.deletedAt)
        },
        draft,
        context?.idempotency?.keep(undefined),
      )
    })
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
        (log) =>
          this.#durability.persist(
            record,
            draft === undefined ? undefined : log,
            current === undefined && context?.bulk === true,
          ),
        () => {
          this.#index.put(record)
        },
        draft,
        draft === undefined ? undefined : context?.idempotency?.keep(record),
      )
      return record
    } finally {
      if (claims) this.#reserved.delete(record.emailKey)
    }
  }

  #reserve(record: UserRecord): void {
    const holder = this.#index.idOfEmail(record.emailKey)
    if (
      (holder !== undefined && holder !== record.user.id) ||
      this.#reserved.has(record.emailKey)
    ) {
      throw duplicateEmail()
    }
    this.#reserved.add(record.emailKey)
  }

  #require(id: string): UserRecord {
    const current = this.#index.get(id)
    if (current === undefined) throw userNotFound()
    return current
  }
}

/**
 * The durability's kept keys, whose `keepAlone` is a durable write like a change's: refused on a
 * read-only store, and a failure answered (and counted against the store's health) as a failed
 * change is, storage_unavailable.
 */
function keptThrough(keys: KeptKeys, writes: ChangeCommit): KeptKeys {
  return {
    find: (subject, key) => keys.find(subject, key),
    hold: (subject, key) => keys.hold(subject, key),
    release: (subject, key) => keys.release(subject, key),
    async keepAlone(kept) {
      writes.requireWritable()
      await writes.run(
        () => keys.keepAlone(kept),
        () => undefined,
      )
    },
  }
}
