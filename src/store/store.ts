import type { ChangeContext } from '../domain/event.js'
import type { User, UserRecord, UserStatus } from '../domain/user.js'
import type { EventFeed } from './event-feed.js'
import type { KeptKeys } from './kept-keys.js'
import type { WebhookStore } from './webhook-store.js'

/** Which users a page holds; every filter is optional and they combine with AND. */
export interface ListFilter {
  readonly statuses?: readonly UserStatus[]
  /** Exact match, compared case-insensitively. */
  readonly email?: string
  /** Case-insensitive substring of name or email. */
  readonly q?: string
}

export interface ListQuery {
  readonly filter: ListFilter
  readonly order: 'asc' | 'desc'
  /** Keyset paging: only ids after this one (in `order`); it need not be stored any more. */
  readonly after?: string
  /** The most items of the page, at least 1. */
  readonly limit: number
  /**
   * The most users a page may test against a filter no index answers (today `q`) before it stops,
   * a positive integer; undefined: no bound. Users picked by status or email alone are not counted.
   */
  readonly scanBudget?: number
}

export interface ListPage {
  /** The matches in `order`, at most `limit` of them. */
  readonly items: readonly UserRecord[]
  /**
   * True when the walk must go on: another match follows the last item, or the scan budget ran out
   * before the end (the page may then be short, even empty). False only at the end of the walk.
   */
  readonly hasMore: boolean
  /**
   * Set whenever `hasMore` is: the `after` of the next page, past every match already returned.
   * The last item when another match follows it, else the last user examined (the budget ran out).
   */
  readonly resumeAfter?: string
}

/** A token subject's state, as the subject check sees it. */
export interface SubjectState {
  readonly status: UserStatus | undefined
  readonly deleted: boolean
  /** The user's `tokensValidAfter`, when it has one. */
  readonly tokensValidAfter: string | undefined
}

/** A user read for a token's subject: the user (none when there is no such user) and the subject's state. */
export interface SubjectRead {
  readonly record: UserRecord | undefined
  readonly subject: SubjectState
}

/**
 * Computes the next state of a user inside the store's lock for that user, or returns undefined
 * to keep it as it is. It may throw (a failed precondition, a refused change): nothing is written.
 */
export type ChangeUser = (current: UserRecord) => User | undefined

/**
 * How a store is doing. `degraded`: the last write was refused by the disk (full, read-only) and
 * the next may work; `read_only`: a durability step failed or the data directory went away, and
 * only a restart brings writes back. Readiness is 503 unless `ok`.
 */
export interface StoreHealth {
  readonly state: 'ok' | 'degraded' | 'read_only'
  readonly reason?: string
}

/**
 * What differs between stores, declared by each (like abstract-level's `supports` manifest) so
 * that nobody has to find it out with `instanceof`: the process, the service and the shared store
 * suite read it.
 */
export interface StoreCapabilities {
  /**
   * The directory the store keeps its files in and holds the lock of while open (the file store);
   * undefined for a store that keeps none. The process takes the data directory's lock itself
   * when the store does not.
   */
  readonly dataDir: string | undefined
  /** Whether what the store holds outlives the process (false: memory only). */
  readonly durable: boolean
  /**
   * Whether other processes write to it too (replicas of one database): nothing is cached, and
   * the process opens it before it listens, so that a schema newer than the code refuses the start.
   */
  readonly shared: boolean
  /**
   * Whether the store can be made to refuse writes from outside the process in a test: the file
   * store turns read-only when its directory goes away. The shared suite shows the refusal then.
   */
  readonly turnsReadOnly: boolean
}

/**
 * Where users live. Writes to one user are serialised, a change is checked against the state it
 * replaces, and email uniqueness (case-insensitive) holds across concurrent writers. A resolved
 * write is durable. A failed one leaves the store as it was, except when the disk shows it
 * anyway (a rename done before a failed directory fsync): then memory shows it too, and the
 * error is storage_unavailable. Every method rejects with ServiceErrors only; every store runs
 * the shared store suite (test/helpers/store-suite.ts).
 */
export interface Store {
  readonly capabilities: StoreCapabilities
  /**
   * Claims what the store owns exclusively, synchronously, before the service listens: the file
   * store takes its data directory's lock (or throws a LockError). A no-op for a store that owns
   * nothing; open() does it too. Idempotent.
   */
  lock(): void
  /**
   * Gets ready to open without loading anything: the PostgreSQL store loads its driver (a missing
   * one refuses the start, before the service listens) and makes its pool. A no-op for the others;
   * open() does it too. Idempotent.
   */
  prepare(): Promise<void>
  /** Loads what the store holds; must finish before any other call below. */
  open(): Promise<void>
  close(): Promise<void>
  get(id: string): Promise<UserRecord | undefined>
  /**
   * The users of these ids that exist, in any order (batch get, docs/api.md); unknown ids are
   * left out.
   */
  getMany(ids: readonly string[]): Promise<UserRecord[]>
  /** True when the id belonged to a user that was deleted (a tombstone is kept forever). */
  isDeleted(id: string): Promise<boolean>
  /**
   * What the per-request subject check (docs/api.md) needs of an id, in one call: the user's
   * status (none when there is no such user) and whether the id was deleted.
   */
  subjectOf(id: string): Promise<SubjectState>
  /**
   * get(id) and subjectOf(subject) in one call, both as they are at one moment: what a read of one
   * user on behalf of a token's subject needs (one statement on PostgreSQL, where each call is a
   * round trip to the database).
   */
  getAs(id: string, subject: string): Promise<SubjectRead>
  list(query: ListQuery): Promise<ListPage>
  /**
   * Throws duplicate_email when another user has the email, duplicate_id when the id is or was
   * taken. `check` runs inside the lock just before the write and may throw to refuse it.
   */
  create(user: User, check?: () => void, context?: ChangeContext): Promise<UserRecord>
  /** Throws not_found for an unknown id, duplicate_email on a collision. */
  update(id: string, change: ChangeUser, context?: ChangeContext): Promise<UserRecord>
  /**
   * Replaces the user by a tombstone; not_found for an unknown id. `check` runs inside the lock
   * before the delete and may throw to refuse it.
   */
  delete(id: string, check?: (current: UserRecord) => void, context?: ChangeContext): Promise<void>
  /**
   * The change feed (docs/events.md): every change above appends exactly one event, atomically
   * with it, and a change that changes nothing appends none.
   */
  readonly events: EventFeed
  /**
   * The kept `Idempotency-Key`s (docs/api.md, safe retries). A change whose context carries a key
   * (ChangeContext's `idempotency`) keeps it in the same atomic, durable step as the change and
   * its event: a change that is stored has its key, and a key is never stored without its change.
   */
  readonly keys: KeptKeys
  /**
   * The webhook endpoints, their cursors over `events`, their delivery logs and who delivers to
   * each (docs/webhooks.md).
   */
  readonly webhooks: WebhookStore
  /** How the store is doing; readiness is 503 unless `ok`. */
  health(): StoreHealth
  /** How many users it holds when it knows without a query (for /metrics), else undefined. */
  count(): number | undefined
  /**
   * Makes the store's own upkeep (the file store's deletion of expired keys' journals and of old
   * event segments) wait while `paused` says so: the service's maintenance, during which a backup
   * copies the data directory and no file may change. A no-op for a store with no such upkeep.
   */
  pauseUpkeep(paused: () => boolean): void
}
