import type { User, UserRecord, UserStatus } from '../users/user.js'

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
  /** Keyset paging: only ids after this one (in `order`). */
  readonly after?: string
  readonly limit: number
}

export interface ListPage {
  readonly items: readonly UserRecord[]
  /** True when at least one more user matches after the last item. */
  readonly hasMore: boolean
}

/**
 * Computes the next state of a user inside the store's lock for that user, or returns undefined
 * to keep it as it is. It may throw (a failed precondition, a refused change): nothing is written.
 */
export type ChangeUser = (current: UserRecord) => User | undefined

/**
 * Where users live. Writes to one user are serialised, a change is checked against the state it
 * replaces, and email uniqueness (case-insensitive) holds across concurrent writers. A resolved
 * write is durable; a failed one leaves the store as it was.
 */
export interface Store {
  /** Loads what the store holds; must finish before any other call. */
  open(): Promise<void>
  close(): Promise<void>
  get(id: string): Promise<UserRecord | undefined>
  list(query: ListQuery): Promise<ListPage>
  /** Throws HttpError duplicate_email when another user has the email. */
  create(user: User): Promise<UserRecord>
  /** Throws HttpError not_found for an unknown id, duplicate_email on a collision. */
  update(id: string, change: ChangeUser): Promise<UserRecord>
  /** `check` runs inside the lock before the delete and may throw to refuse it. */
  delete(id: string, check?: (current: UserRecord) => void): Promise<void>
}
