import type { UserRecord } from '../users/user.js'
import type { ListFilter, ListPage, ListQuery } from './store.js'

/**
 * Users in memory: by id, by email key (uniqueness) and as ids in ascending order, so that a page
 * costs O(log n + page size) when no filter is given. UUIDv7 ids sort by creation time.
 */
export class UserIndex {
  readonly #byId = new Map<string, UserRecord>()
  readonly #byEmail = new Map<string, string>()
  readonly #sortedIds: string[] = []

  get size(): number {
    return this.#byId.size
  }

  get(id: string): UserRecord | undefined {
    return this.#byId.get(id)
  }

  /** The id of the user holding an email key, if any. */
  idOfEmail(emailKey: string): string | undefined {
    return this.#byEmail.get(emailKey)
  }

  /** Adds or replaces a record (the caller has checked email uniqueness). */
  put(record: UserRecord): void {
    const id = record.user.id
    const previous = this.#byId.get(id)
    if (previous === undefined) {
      this.#insertId(id)
    } else if (previous.emailKey !== record.emailKey) {
      this.#byEmail.delete(previous.emailKey)
    }
    this.#byId.set(id, record)
    this.#byEmail.set(record.emailKey, id)
  }

  remove(id: string): void {
    const record = this.#byId.get(id)
    if (record === undefined) return
    this.#byId.delete(id)
    if (this.#byEmail.get(record.emailKey) === id) this.#byEmail.delete(record.emailKey)
    const at = lowerBound(this.#sortedIds, id)
    if (this.#sortedIds[at] === id) this.#sortedIds.splice(at, 1)
  }

  list(query: ListQuery): ListPage {
    const matches = toPredicate(query.filter)
    if (query.filter.email !== undefined) return this.#listByEmail(query, matches)
    const ids = this.#sortedIds
    const items: UserRecord[] = []
    const step = query.order === 'asc' ? 1 : -1
    let i = this.#startIndex(query)
    for (; i >= 0 && i < ids.length; i += step) {
      const record = this.#byId.get(ids[i] ?? '')
      if (record === undefined || !matches(record)) continue
      if (items.length === query.limit) return { items, hasMore: true }
      items.push(record)
    }
    return { items, hasMore: false }
  }

  #startIndex(query: ListQuery): number {
    const ids = this.#sortedIds
    if (query.after === undefined) return query.order === 'asc' ? 0 : ids.length - 1
    return query.order === 'asc' ? upperBound(ids, query.after) : lowerBound(ids, query.after) - 1
  }

  /** An email names at most one user: look it up instead of scanning. */
  #listByEmail(query: ListQuery, matches: (record: UserRecord) => boolean): ListPage {
    const id = this.#byEmail.get((query.filter.email ?? '').toLowerCase())
    const record = id === undefined ? undefined : this.#byId.get(id)
    if (record === undefined || !matches(record) || query.limit === 0) return { items: [], hasMore: false }
    const after = query.after
    if (after !== undefined && (query.order === 'asc' ? record.user.id <= after : record.user.id >= after)) {
      return { items: [], hasMore: false }
    }
    return { items: [record], hasMore: false }
  }

  #insertId(id: string): void {
    const ids = this.#sortedIds
    const last = ids[ids.length - 1]
    // New ids are time ordered, so they nearly always belong at the end.
    if (last === undefined || id > last) ids.push(id)
    else ids.splice(lowerBound(ids, id), 0, id)
  }
}

function toPredicate(filter: ListFilter): (record: UserRecord) => boolean {
  const statuses = filter.statuses === undefined ? undefined : new Set(filter.statuses)
  const email = filter.email?.toLowerCase()
  const q = filter.q?.toLowerCase()
  if (statuses === undefined && email === undefined && q === undefined) return () => true
  return (record) => {
    if (statuses !== undefined && !statuses.has(record.user.status)) return false
    if (email !== undefined && record.emailKey !== email) return false
    return q === undefined || record.emailKey.includes(q) || record.user.name.toLowerCase().includes(q)
  }
}

/** The first index whose id is not less than `id`. */
function lowerBound(ids: readonly string[], id: string): number {
  let low = 0
  let high = ids.length
  while (low < high) {
    const mid = (low + high) >>> 1
    if ((ids[mid] ?? '') < id) low = mid + 1
    else high = mid
  }
  return low
}

/** The first index whose id is greater than `id`. */
function upperBound(ids: readonly string[], id: string): number {
  let low = 0
  let high = ids.length
  while (low < high) {
    const mid = (low + high) >>> 1
    if ((ids[mid] ?? '') <= id) low = mid + 1
    else high = mid
  }
  return low
}
