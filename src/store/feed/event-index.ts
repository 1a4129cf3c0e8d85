import { EVENT_TYPES, type EventType } from '../../domain/event.js'

/** Where an event's JSON is kept: for the file log, its segment's number and byte offset. */
export interface EventPlace {
  readonly segment: number
  readonly offset: number
  /** The byte length of the event's JSON (as `eventJson` writes it). */
  readonly bytes: number
}

const INITIAL_ROWS = 1024

/**
 * The feed's readable events in id order, a few fixed-size numbers each (about 30 bytes), never
 * their bodies: what a page needs to find its matches (id, type, user) and to bound its size,
 * and where each body is. Rows have a number (a slot) that stays theirs until they are dropped
 * from the front, as retention prunes.
 */
export class EventIndex {
  #ids = new Float64Array(INITIAL_ROWS)
  #types = new Uint8Array(INITIAL_ROWS)
  #users = new Uint32Array(INITIAL_ROWS)
  #sizes = new Uint32Array(INITIAL_ROWS)
  #segments = new Uint32Array(INITIAL_ROWS)
  #offsets = new Float64Array(INITIAL_ROWS)
  /** The array position of the first row, and how many rows there are. */
  #head = 0
  #count = 0
  /** Rows dropped from the front so far: the first row's slot. */
  #dropped = 0
  /** Users get a small number each; the feed has at most one per user the store has known. */
  readonly #userNumbers = new Map<string, number>()

  /** The slot of the first row. */
  get start(): number {
    return this.#dropped
  }

  /** One past the slot of the last row. */
  get end(): number {
    return this.#dropped + this.#count
  }

  get size(): number {
    return this.#count
  }

  /** Adds a row after every other (ids must grow); returns its slot. */
  push(id: number, type: EventType, userId: string, place: EventPlace): number {
    const last = this.#count > 0 ? this.#ids[this.#head + this.#count - 1] : undefined
    if (last !== undefined && id <= last)
      throw new RangeError(`event id ${id} is not after ${last}`)
    if (this.#head + this.#count === this.#ids.length)
      this.#resize(Math.max(INITIAL_ROWS, this.#count * 2))
    const at = this.#head + this.#count
    this.#ids[at] = id
    this.#types[at] = EVENT_TYPES.indexOf(type)
    this.#users[at] = this.#userNumber(userId)
    this.#sizes[at] = place.bytes
    this.#segments[at] = place.segment
    this.#offsets[at] = place.offset
    this.#count += 1
    return this.end - 1
  }

  idAt(slot: number): number {
    return this.#ids[this.#at(slot)] ?? 0
  }

  placeAt(slot: number): EventPlace {
    const at = this.#at(slot)
    return {
      segment: this.#segments[at] ?? 0,
      offset: this.#offsets[at] ?? 0,
      bytes: this.#sizes[at] ?? 0,
    }
  }

  bytesAt(slot: number): number {
    return this.#sizes[this.#at(slot)] ?? 0
  }

  /** The slot of the first row whose id is above `id` (end when none is). */
  firstAfter(id: number): number {
    let low = this.#head
    let high = this.#head + this.#count
    while (low < high) {
      const mid = (low + high) >>> 1
      if ((this.#ids[mid] ?? 0) <= id) low = mid + 1
      else high = mid
    }
    return low - this.#head + this.#dropped
  }

  /**
   * A test of a row against a page's filters, or undefined when no row can match (a user with
   * no event). Reads the index only: filtering costs no body.
   */
  matcher(
    types: readonly EventType[] | undefined,
    userId: string | undefined,
  ): ((slot: number) => boolean) | undefined {
    const user = userId === undefined ? undefined : this.#userNumbers.get(userId)
    if (userId !== undefined && user === undefined) return undefined
    let mask = 0
    for (const type of types ?? EVENT_TYPES) mask |= 1 << EVENT_TYPES.indexOf(type)
    return (slot) => {
      const at = this.#at(slot)
      return (
        (mask & (1 << (this.#types[at] ?? 0))) !== 0 &&
        (user === undefined || this.#users[at] === user)
      )
    }
  }

  /** Drops every row before `slot`. */
  dropBefore(slot: number): void {
    const count = Math.min(Math.max(0, slot - this.#dropped), this.#count)
    this.#head += count
    this.#count -= count
    this.#dropped += count
    if (this.#count === 0) this.#head = 0
    // Most of the arrays dead after a large prune: give the memory back.
    if (this.#ids.length > INITIAL_ROWS && this.#count * 4 < this.#ids.length)
      this.#resize(Math.max(INITIAL_ROWS, this.#count * 2))
  }

  /** Keeps only the rows `keep` accepts, in order; only before any row was dropped (a load). */
  retain(keep: (slot: number) => boolean): void {
    if (this.#dropped !== 0) throw new Error('retain is for a fresh index')
    let to = 0
    for (let from = 0; from < this.#count; from += 1) {
      if (!keep(from)) continue
      const at = this.#head + from
      const into = this.#head + to
      this.#ids[into] = this.#ids[at] ?? 0
      this.#types[into] = this.#types[at] ?? 0
      this.#users[into] = this.#users[at] ?? 0
      this.#sizes[into] = this.#sizes[at] ?? 0
      this.#segments[into] = this.#segments[at] ?? 0
      this.#offsets[into] = this.#offsets[at] ?? 0
      to += 1
    }
    this.#count = to
  }

  #at(slot: number): number {
    return this.#head + slot - this.#dropped
  }

  #userNumber(userId: string): number {
    let number = this.#userNumbers.get(userId)
    if (number === undefined) {
      number = this.#userNumbers.size
      this.#userNumbers.set(userId, number)
    }
    return number
  }

  /** Moves the rows to the front of arrays of `rows` places. */
  #resize(rows: number): void {
    const from = this.#head
    const to = this.#head + this.#count
    const copy = <T extends Float64Array | Uint32Array | Uint8Array>(
      old: T,
      make: (n: number) => T,
    ): T => {
      const next = make(rows)
      next.set(old.subarray(from, to))
      return next
    }
    this.#ids = copy(this.#ids, (n) => new Float64Array(n))
    this.#types = copy(this.#types, (n) => new Uint8Array(n))
    this.#users = copy(this.#users, (n) => new Uint32Array(n))
    this.#sizes = copy(this.#sizes, (n) => new Uint32Array(n))
    this.#segments = copy(this.#segments, (n) => new Uint32Array(n))
    this.#offsets = copy(this.#offsets, (n) => new Float64Array(n))
    this.#head = 0
  }
}
