import { foldFinalSigma, toSearchText, type UserRecord, type UserStatus } from '../domain/user.js'
import { type IdCursor, SortedIds } from './sorted-ids.js'
import type { ListPage, ListQuery } from './store.js'

/** What one `list` call looked at: tests pass it to bound the work of a page. */
export interface ListWork {
  /** Records read, matching or not; `list` adds to it. */
  examined: number
}

type Order = ListQuery['order']

const NO_IDS = new SortedIds()

/**
 * Users in memory: by id, by email key (uniqueness) and as ids in ascending order, all of them and
 * per status, so that a page without `q` costs O(log n + limit). UUIDv7 ids sort by creation time.
 */
export class UserIndex {
  readonly #byId = new Map<string, UserRecord>()
  readonly #byEmail = new Map<string, string>()
  readonly #sortedIds = new SortedIds()
  readonly #idsByStatus = new Map<UserStatus, SortedIds>()

  get size(): number {
    return this.#byId.size
  }

  /** Emails held: fewer than `size` only when puts gave two users one email. */
  get emails(): number {
    return this.#byEmail.size
  }

  get(id: string): UserRecord | undefined {
    return this.#byId.get(id)
  }

  /** Every record, in ascending id order. */
  *records(): Generator<UserRecord> {
    for (const id of this.#sortedIds.ids()) {
      const record = this.#byId.get(id)
      if (record !== undefined) yield record
    }
  }

  /** The id of the user holding an email key, if any. */
  idOfEmail(emailKey: string): string | undefined {
    return this.#byEmail.get(emailKey)
  }

  /** Adds or replaces a record (the caller has checked email uniqueness). */
  put(record: UserRecord): void {
    const id = record.user.id
    const status = record.user.status
    const previous = this.#byId.get(id)
    if (previous === undefined) {
      this.#sortedIds.insert(id)
      this.#statusIds(status).insert(id)
    } else {
      if (previous.emailKey !== record.emailKey) this.#byEmail.delete(previous.emailKey)
      if (previous.user.status !== status) {
        this.#statusIds(previous.user.status).remove(id)
        this.#statusIds(status).insert(id)
      }
    }
    this.#byId.set(id, record)
    this.#byEmail.set(record.emailKey, id)
  }

  remove(id: string): void {
    const record = this.#byId.get(id)
    if (record === undefined) return
    this.#byId.delete(id)
    if (this.#byEmail.get(record.emailKey) === id) this.#byEmail.delete(record.emailKey)
    this.#sortedIds.remove(id)
    this.#statusIds(record.user.status).remove(id)
  }

  /**
   * One page: an email is looked up, statuses walk their own id arrays, and only `q` is tested
   * record by record, at most `scanBudget` of them. `work`, if given, learns what was examined.
   */
  list(query: ListQuery, work?: ListWork): ListPage {
    const { email, statuses, q } = query.filter
    if (email !== undefined) return this.#listByEmail(query, email.toLowerCase(), work)
    const sources =
      statuses === undefined
        ? [this.#sortedIds]
        : [...new Set(statuses)].map((status) => this.#idsByStatus.get(status) ?? NO_IDS)
    const next = walkIds(sources, query.order, query.after)
    const needle = q === undefined ? undefined : toSearchText(q)
    // Ids from the arrays match by construction; only records tested against q spend the budget.
    let left = needle === undefined ? Infinity : Math.max(1, query.scanBudget ?? Infinity)
    let lastTested: string | undefined
    let examined = 0
    const items: UserRecord[] = []
    let page: ListPage | undefined
    while (page === undefined) {
      const id = next()
      if (id === undefined) {
        page = { items, hasMore: false }
      } else if (left <= 0) {
        page = pageWithMore(items, lastTested)
      } else {
        const record = this.#byId.get(id)
        examined += 1
        if (record === undefined) continue
        if (needle !== undefined) {
          left -= 1
          lastTested = id
          if (!matchesText(record, needle)) continue
        }
        // The page is full and this match proves there is more: resume after the last item.
        if (items.length === query.limit)
          page = pageWithMore(items, items.at(-1)?.user.id ?? query.after)
        else items.push(record)
      }
    }
    if (work !== undefined) work.examined += examined
    return page
  }

  /** An email names at most one user: look it up instead of scanning. */
  #listByEmail(query: ListQuery, emailKey: string, work: ListWork | undefined): ListPage {
    const id = this.#byEmail.get(emailKey)
    const record = id === undefined ? undefined : this.#byId.get(id)
    if (record === undefined) return { items: [], hasMore: false }
    if (work !== undefined) work.examined += 1
    const { statuses, q } = query.filter
    const found =
      query.limit > 0 &&
      isAfter(record.user.id, query.order, query.after) &&
      (statuses === undefined || statuses.includes(record.user.status)) &&
      (q === undefined || matchesText(record, toSearchText(q)))
    return { items: found ? [record] : [], hasMore: false }
  }

  #statusIds(status: UserStatus): SortedIds {
    let ids = this.#idsByStatus.get(status)
    if (ids === undefined) {
      ids = new SortedIds()
      this.#idsByStatus.set(status, ids)
    }
    return ids
  }
}

function pageWithMore(items: readonly UserRecord[], resumeAfter: string | undefined): ListPage {
  return resumeAfter === undefined
    ? { items, hasMore: true }
    : { items, hasMore: true, resumeAfter }
}

function matchesText(record: UserRecord, needle: string): boolean {
  return (
    foldFinalSigma(record.emailKey).includes(needle) ||
    toSearchText(record.user.name).includes(needle)
  )
}

function isAfter(id: string, order: Order, after: string | undefined): boolean {
  return after === undefined || (order === 'asc' ? id > after : id < after)
}

/**
 * The ids of several sorted, disjoint sets as one walk in `order`, starting after `after`: each
 * step takes the best of the heads (k ≤ 3), so ids of other sets are never looked at.
 */
function walkIds(
  sources: readonly SortedIds[],
  order: Order,
  after: string | undefined,
): () => string | undefined {
  const cursors = sources.map((ids) => ids.cursor(order, after))
  return () => {
    let best: IdCursor | undefined
    for (const cursor of cursors) {
      const id = cursor.peek()
      const lead = best?.peek()
      if (id !== undefined && (lead === undefined || (order === 'asc' ? id < lead : id > lead)))
        best = cursor
    }
    const id = best?.peek()
    best?.advance()
    return id
  }
}
