import { hasKeyOrder, type Metadata, metadataJson } from './metadata.js'

export { EMPTY_METADATA, type Metadata } from './metadata.js'

export const USER_STATUSES = ['pending', 'active', 'suspended'] as const
export type UserStatus = (typeof USER_STATUSES)[number]

/**
 * The highest version a user may reach: 2^53 - 1, the largest integer every JSON client holds
 * exactly (past it, +1 rounds back to the same number and the ETag would stop changing). Every
 * store honours it: PostgreSQL keeps versions in bigint columns.
 */
export const MAX_VERSION = Number.MAX_SAFE_INTEGER

/**
 * The highest version a user itself reaches, 2^53 - 2. Its deletion is a change too, and its
 * event takes the next version (a consumer that skips versions it has seen must not skip it): the
 * last version is kept for it, so that every user can be deleted and no event passes MAX_VERSION.
 */
export const MAX_USER_VERSION = MAX_VERSION - 1

/** A user as stored and as shown (docs/api.md, the user). */
export interface User {
  readonly id: string
  readonly email: string
  readonly name: string
  readonly status: UserStatus
  readonly metadata: Metadata
  readonly createdAt: string
  readonly updatedAt: string
  readonly version: number
  /**
   * Tokens of this user issued before it (whole seconds) are refused: set by :revokeTokens,
   * absent until the first revocation (docs/api.md).
   */
  readonly tokensValidAfter?: string
}

/** A user with what every read needs, computed once per version: its JSON, ETag and email key. */
export interface UserRecord {
  readonly user: User
  readonly json: string
  readonly etag: string
  readonly emailKey: string
}

/** Emails are unique compared case-insensitively, and stored as given. */
export function toEmailKey(email: string): string {
  const key = email.toLowerCase()
  // Most emails are already lower case: keep one string instead of two equal ones.
  return key === email ? email : key
}

/**
 * How `q` compares text (docs/api.md, Listing): lower case, as the email key, with the final sigma
 * read as σ. toLowerCase writes Σ as ς at the end of a word and σ inside one, so without this a
 * piece cut from a word (`ΑΣ` of `ΑΣΑ`) would not be found in it.
 */
export function toSearchText(text: string): string {
  return foldFinalSigma(text.toLowerCase())
}

/** toSearchText of text already in lower case (an email key): ς read as σ. */
export function foldFinalSigma(lower: string): string {
  return lower.includes('ς') ? lower.replaceAll('ς', 'σ') : lower
}

const SMALL_ETAGS = Array.from({ length: 64 }, (_, version) => `"v${version}"`)

export function toEtag(version: number): string {
  return SMALL_ETAGS[version] ?? `"v${version}"`
}

export function toRecord(user: User): UserRecord {
  if (hasKeyOrder(user.metadata)) return recordWithJson(user, orderedJson(user))
  // Fields in the documented order (docs/api.md), whatever order the object was built in.
  const json = JSON.stringify({
    id: user.id,
    email: user.email,
    name: user.name,
    status: user.status,
    metadata: user.metadata,
    createdAt: user.createdAt,
    updatedAt: user.updatedAt,
    version: user.version,
    tokensValidAfter: user.tokensValidAfter,
  })
  return recordWithJson(user, json)
}

/** toRecord's JSON for metadata whose key order JSON.stringify would not keep (index-like keys). */
function orderedJson(user: User): string {
  const head = JSON.stringify({
    id: user.id,
    email: user.email,
    name: user.name,
    status: user.status,
  })
  const tail = JSON.stringify({
    createdAt: user.createdAt,
    updatedAt: user.updatedAt,
    version: user.version,
    tokensValidAfter: user.tokensValidAfter,
  })
  return `${head.slice(0, -1)},"metadata":${metadataJson(user.metadata)},${tail.slice(1)}`
}

/**
 * The record of a user whose JSON is already known to be exactly what toRecord makes of it (read
 * back from a file written from a record): no second JSON.stringify.
 */
export function recordWithJson(user: User, json: string): UserRecord {
  return Object.freeze({ user, json, etag: toEtag(user.version), emailKey: toEmailKey(user.email) })
}

export function isUserStatus(value: unknown): value is UserStatus {
  return typeof value === 'string' && (USER_STATUSES as readonly string[]).includes(value)
}
