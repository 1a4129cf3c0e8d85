/**
 * Rate limits (docs/operations.md): a fixed window per subject (a valid token's `sub`) and per
 * client address, counted in this process's memory, told on every counted answer in the
 * RateLimit and RateLimit-Policy fields (draft-ietf-httpapi-ratelimit-headers) and GitHub's
 * X-RateLimit-*, and refused with 429 once spent.
 */
import { randomInt } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

import { type ClientAddress, createClientAddress } from './client-address.js'
import { HttpError } from './problem.js'
import { RateLimitTable, REFUSED } from './rate-limit-table.js'

/** `Q/W`: Q requests per W seconds. */
export interface RateLimitPolicy {
  readonly quota: number
  readonly windowSeconds: number
}

export interface RateLimiterOptions {
  /** Per token subject; undefined: off. */
  subject: RateLimitPolicy | undefined
  /** Per client address; undefined: off. */
  address: RateLimitPolicy | undefined
  /** The most partitions held at once. */
  maxClients: number
  /** Addresses and CIDR blocks whose X-Forwarded-For is believed. */
  trustedProxies: readonly string[]
  /** Milliseconds since the epoch. */
  now: () => number
}

/** What counting a request decided: the fields for its answers, and a refusal when spent. */
export interface Counted {
  readonly headers: readonly string[]
  readonly refusal: HttpError | undefined
}

export interface RateLimiter {
  /**
   * Counts a request against `sub` (a token that passed its checks) or its client address;
   * undefined when its policy is off (nothing counted, no field).
   */
  count(req: IncomingMessage, sub: string | undefined): Counted | undefined
  /** Partitions held (for tests). */
  readonly size: number
}

type PolicyName = 'subject' | 'address'

interface Policy {
  readonly name: PolicyName
  readonly index: number
  readonly quota: number
  readonly windowMs: number
  readonly policyField: string
  readonly limitField: string
  readonly violated: readonly PolicyName[]
}

/** Undefined when both policies are off: the listener then does nothing at all. */
export function createRateLimiter(options: RateLimiterOptions): RateLimiter | undefined {
  const policies: Policy[] = []
  const add = (name: PolicyName, spec: RateLimitPolicy | undefined): Policy | undefined => {
    if (spec === undefined) return undefined
    const policy = {
      name,
      index: policies.length,
      quota: spec.quota,
      windowMs: spec.windowSeconds * 1000,
      policyField: `"${name}";q=${spec.quota};w=${spec.windowSeconds}`,
      limitField: String(spec.quota),
      violated: [name],
    }
    policies.push(policy)
    return policy
  }
  const subject = add('subject', options.subject)
  const address = add('address', options.address)
  if (subject === undefined && address === undefined) return undefined
  const table = new RateLimitTable(options.maxClients, policies)
  const clientAddress: ClientAddress = createClientAddress(options.trustedProxies)
  // A seed of this process's own, so that nobody outside can pick keys that share a digest.
  const seed = randomInt(2 ** 47)
  const { now } = options
  // Windows are timed on a clock that never runs back: a wall clock set back (an NTP step, a
  // restored virtual machine) would lengthen every open window by as much, and its 429s with it.
  let wall = now()
  let elapsed = wall
  const tick = (): number => {
    const at = now()
    if (at > wall) elapsed += at - wall
    wall = at
    return elapsed
  }

  return {
    get size() {
      return table.size
    },
    count(req, sub) {
      const policy = sub === undefined ? address : subject
      if (policy === undefined) return undefined
      const key = sub ?? clientAddress(req)
      const at = tick()
      const left = table.take(policy.index, partitionDigest(key, seed), at)
      return counted(policy, left, table.endsAtOfLast - at, wall)
    },
  }
}

/** `leftMs`: until the window ends; `wallAt`: now, on the wall clock the fields tell. */
function counted(policy: Policy, left: number, leftMs: number, wallAt: number): Counted {
  const endsAt = wallAt + leftMs
  const t = secondsLeft(endsAt, wallAt)
  const headers = rateLimitFields(policy, left === REFUSED ? 0 : left, t, endsAt)
  if (left !== REFUSED) return { headers, refusal: undefined }
  const refusal = new HttpError(
    'rate_limited',
    `This ${policy.name}'s quota of ${policy.quota} requests per ${policy.windowMs / 1000} s is spent; try again in ${t} s.`,
    { headers: { 'retry-after': String(t) }, violatedPolicies: policy.violated },
  )
  return { headers, refusal }
}

/** Seconds until the window ends, rounded up, at least 1. */
export function secondsLeft(endsAt: number, at: number): number {
  return Math.max(1, Math.ceil((endsAt - at) / 1000))
}

/** The fields of a counted answer, as a flat name/value list. */
export function rateLimitFields(
  policy: Pick<Policy, 'name' | 'quota' | 'policyField' | 'limitField'>,
  remaining: number,
  t: number,
  endsAt: number,
): string[] {
  return [
    'ratelimit-policy',
    policy.policyField,
    'ratelimit',
    `"${policy.name}";r=${remaining};t=${t}`,
    'x-ratelimit-limit',
    policy.limitField,
    'x-ratelimit-remaining',
    String(remaining),
    'x-ratelimit-used',
    String(policy.quota - remaining),
    'x-ratelimit-reset',
    String(Math.ceil(endsAt / 1000)),
  ]
}

/**
 * A partition's key: a 53-bit digest (cyrb53, seeded), so that an entry's size does not depend
 * on the subject's length. Two keys that share a digest share a quota; among 100,000 partitions
 * that happens about once in 10^6 tables.
 */
export function partitionDigest(key: string, seed: number): number {
  let h1 = 0xdeadbeef ^ seed
  let h2 = 0x41c6ce57 ^ Math.floor(seed / 2 ** 32)
  for (let i = 0; i < key.length; i += 1) {
    const ch = key.charCodeAt(i)
    h1 = Math.imul(h1 ^ ch, 2654435761)
    h2 = Math.imul(h2 ^ ch, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507)
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507)
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  return 4294967296 * (2097151 & h2) + (h1 >>> 0)
}
