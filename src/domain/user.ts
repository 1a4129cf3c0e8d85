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

/** Metadata: string keys to string values, held in a null-prototype object. */
export type Metadata = Readonly<Record<string, string>>

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

/** Metadata of a user that has none: one shared, frozen object instead of one per user. */
export const EMPTY_METADATA: Metadata = Object.freeze(Object.create(null) as Record<string, string>)

/** Emails are unique compared case-insensitively, and stored as given. */
export function toEmailKey(email: string): string {
  const key = email.toLowerCase()
  // Most emails are already lower case: keep one string instead of two equal ones.
  return key === email ? email : key
}

const SMALL_ETAGS = Array.from({ length: 64 }, (_, version) => `"v${version}"`)

export function toEtag(version: number): string {
  return SMALL_ETAGS[version] ?? `"v${version}"`
}

export function toRecord(user: User): UserRecord {
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
