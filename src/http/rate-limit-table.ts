/**
 * The rate limiter's fixed windows (docs/operations.md, rate limits): a bounded table of
 * partitions, each a digest and a few numbers in typed arrays, so that an entry costs the same
 * bytes whatever its subject. Pure: the caller gives the time.
 */

/** What take() answers for a request refused: the window's units are spent. */
export const REFUSED = -1

export interface WindowPolicy {
  /** Requests per window. */
  readonly quota: number
  readonly windowMs: number
}

/** A policy and its partitions: digest to slot, in the order their windows end. */
interface PolicyPartitions {
  readonly policy: WindowPolicy
  readonly map: Map<number, number>
}

/**
 * At most `capacity` partitions in all. Each policy keeps its partitions in a Map from digest to
 * slot whose insertion order is the order its windows end in (a window lasts the policy's W, and
 * one that opens again is put at the back), so the partition whose window ends first is always
 * the first of one of the maps: ended windows are dropped from the front, and a full table evicts
 * the earlier of the two fronts.
 */
export class RateLimitTable {
  readonly #capacity: number
  readonly #policies: readonly PolicyPartitions[]
  readonly #endsAt: Float64Array
  readonly #used: Uint32Array
  readonly #free: Uint32Array
  #freeCount: number
  #endsAtOfLast = 0

  constructor(capacity: number, policies: readonly WindowPolicy[]) {
    this.#capacity = capacity
    this.#policies = policies.map((policy) => ({ policy, map: new Map<number, number>() }))
    this.#endsAt = new Float64Array(capacity)
    this.#used = new Uint32Array(capacity)
    this.#free = new Uint32Array(capacity)
    for (let i = 0; i < capacity; i += 1) this.#free[i] = capacity - 1 - i
    this.#freeCount = capacity
  }

  /** Partitions held. */
  get size(): number {
    return this.#capacity - this.#freeCount
  }

  /** When the window of the last take() ends, in the caller's milliseconds. */
  get endsAtOfLast(): number {
    return this.#endsAtOfLast
  }

  /**
   * Counts one request of the partition `digest` under policy `index` at `now`: the units left in
   * its window after it, or REFUSED (it takes none). Numbers, not an object: this runs on every
   * request.
   */
  take(index: number, digest: number, now: number): number {
    const entry = this.#policies[index]
    if (entry === undefined) throw new RangeError(`no policy ${index}`)
    const { policy, map } = entry
    let slot = map.get(digest)
    if (slot !== undefined && (this.#endsAt[slot] ?? 0) <= now) {
      map.delete(digest)
      this.#release(slot)
      slot = undefined
    }
    if (slot === undefined) {
      this.#dropEnded(now)
      if (this.#freeCount === 0) this.#evictFirstEnding()
      this.#freeCount -= 1
      slot = this.#free[this.#freeCount] ?? 0
      this.#endsAt[slot] = now + policy.windowMs
      this.#used[slot] = 0
      map.set(digest, slot)
    }
    const used = this.#used[slot] ?? 0
    this.#endsAtOfLast = this.#endsAt[slot] ?? now
    if (used >= policy.quota) return REFUSED
    this.#used[slot] = used + 1
    return policy.quota - used - 1
  }

  #release(slot: number): void {
    this.#free[this.#freeCount] = slot
    this.#freeCount += 1
  }

  /** Drops every partition whose window has ended, from the fronts of the maps. */
  #dropEnded(now: number): void {
    for (const { map } of this.#policies) {
      for (const [digest, slot] of map) {
        if ((this.#endsAt[slot] ?? 0) > now) break
        map.delete(digest)
        this.#release(slot)
      }
    }
  }

  #evictFirstEnding(): void {
    let victim: Map<number, number> | undefined
    let victimDigest = 0
    let victimSlot = 0
    for (const { map } of this.#policies) {
      for (const [digest, slot] of map) {
        if (victim === undefined || (this.#endsAt[slot] ?? 0) < (this.#endsAt[victimSlot] ?? 0)) {
          victim = map
          victimDigest = digest
          victimSlot = slot
        }
        break
      }
    }
    if (victim === undefined) throw new Error('rate limit table full with no partition')
    victim.delete(victimDigest)
    this.#release(victimSlot)
  }
}
