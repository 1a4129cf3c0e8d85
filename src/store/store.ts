import type { ChangeContext } from '../domain/event.js'
import type { EventFeed } from './feed/journal.js'
import type { User, UserRecord, UserStatus } from '../domain/user.js'

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
 * Where users live. Writes to one user are serialised, a change is checked against the state it
 * replaces, and email uniqueness (case-insensitive) holds across concurrent writers. A resolved
 * write is durable. A failed one leaves the store as it was, except when the disk shows it
 * anyway (a rename done before a failed directory fsync): then memory shows it too, and the
 * error is an HttpError storage_unavailable.
 */
export interface Store {
  /** Loads what the store holds; must finish before any other call. */
  open(): Promise<void>
  close(): Promise<void>
  get(id: string): Promise<UserRecord | undefined>
  /** The users of these ids that exist, in any order (batch get, §12); a store without it is asked per id. */
  getMany?(ids: readonly string[]): Promise<UserRecord[]>
  /** True when the id belonged to a user that was deleted (a tombstone is kept forever). */
  isDeleted(id: string): Promise<boolean>
  /**
   * What the per-request subject check (§9) needs of an id, in one call: the user's status (none
   * when there is no such user) and whether the id was deleted. A store without it is asked `get`
   * and `isDeleted`; a store that pays a round trip per call should have it.
   */
  subjectOf?(id: string): Promise<SubjectState>
  list(query: ListQuery): Promise<ListPage>
  /**
   * Throws HttpError duplicate_email when another user has the email. `check` runs inside the
   * lock just before the write and may throw to refuse it.
   */
  create(user: User, check?: () => void, context?: ChangeContext): Promise<UserRecord>
  /** Throws HttpError not_found for an unknown id, duplicate_email on a collision. */
  update(id: string, change: ChangeUser, context?: ChangeContext): Promise<UserRecord>
  /**
   * Replaces the user by a tombstone. `check` runs inside the lock before the delete and may
   * throw to refuse it.
   */
  delete(id: string, check?: (current: UserRecord) => void, context?: ChangeContext): Promise<void>
  /**
   * The change feed (§10): every change above appends exactly one event, atomically with it, and
   * a change that changes nothing appends none. Undefined: a store without a feed.
   */
  readonly events?: EventFeed | undefined
  /** How the store is doing; a store without it is always `ok`. */
  health?(): StoreHealth
  /** How many users it holds, when it knows without a query (for /metrics). */
  count?(): number
}
