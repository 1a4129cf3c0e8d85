import { isUserStatus, MAX_USER_VERSION, type User } from '../domain/user.js'
import { type IdGenerator, isCanonicalUuid, uuid7Ms } from '../domain/uuid7.js'
import { FieldErrors } from './field-errors.js'
import { validateCreate, validateReplace } from './validate-user.js'

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const stampRule = (key: string): string =>
  `${key} must be an instant that exists, in UTC, like 2024-01-31T12:00:00.000Z.`

/**
 * The milliseconds of a time stamp as the API writes them, or undefined when it is not one or
 * names no instant: Date.parse rolls 2026-02-30 over to March 2 and reads T24:00 as the next
 * day, so the instant must write back as the very same text.
 */
function instant(stamp: unknown): number | undefined {
  if (typeof stamp !== 'string' || !TIMESTAMP.test(stamp)) return undefined
  const ms = Date.parse(stamp)
  return !Number.isNaN(ms) && new Date(ms).toISOString() === stamp ? ms : undefined
}

/** The user of one import line, and whether the line was an exported user (it has an id). */
export interface ImportedUser {
  readonly user: User
  readonly exported: boolean
}

/**
 * The user an import line's JSON stands for: an exported user is kept as it was, a new one made as
 * POST /users makes it. Throws validation_failed, as the API's own rules do.
 */
export function toImportedUser(
  value: unknown,
  newId: IdGenerator,
  now: () => number,
): ImportedUser {
  if (isObject(value) && Object.hasOwn(value, 'id')) {
    return { user: toExportedUser(value), exported: true }
  }
  return { user: toNewUser(value, newId, now), exported: false }
}

/** A user as exported: every field kept, the writable ones checked by the API's own rules. */
function toExportedUser(value: Record<string, unknown>): User {
  const { id, status, createdAt, updatedAt, version, tokensValidAfter } = value
  const errors = new FieldErrors()
  const wrong = (pointer: string, message: string): void => {
    errors.add(pointer, 'invalid_format', message)
  }
  const created = instant(createdAt)
  const updated = instant(updatedAt)
  const canonical = typeof id === 'string' && isCanonicalUuid(id)
  // The list's createdAt order is its id order: an id must be a UUIDv7 carrying its createdAt.
  const idMs = canonical ? uuid7Ms(id) : undefined
  if (!canonical) wrong('/id', 'id must be a lower-case UUID.')
  else if (idMs === undefined) wrong('/id', 'id must be a UUIDv7 (version 7, RFC 9562 variant).')
  if (!isUserStatus(status)) wrong('/status', 'status must be pending, active or suspended.')
  if (created === undefined) wrong('/createdAt', stampRule('createdAt'))
  else if (idMs !== undefined && idMs !== created)
    wrong('/createdAt', 'createdAt must be the time its UUIDv7 id carries.')
  if (updated === undefined) wrong('/updatedAt', stampRule('updatedAt'))
  else if (created !== undefined && updated < created)
    wrong('/updatedAt', 'updatedAt must not be before createdAt.')
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1)
    wrong('/version', 'version must be a whole number of at least 1.')
  // Checked here, not only by the store: a stored id is asked for before the store's own check,
  // and a line that breaks a rule is a 422 whatever the id holds. The store's code and wording.
  else if (version > MAX_USER_VERSION)
    errors.add(
      '/version',
      'out_of_range',
      `version must be a whole number from 1 to ${MAX_USER_VERSION}.`,
    )
  const revokedAt = Object.hasOwn(value, 'tokensValidAfter') ? instant(tokensValidAfter) : 0
  if (revokedAt === undefined || revokedAt % 1000 !== 0)
    wrong(
      '/tokensValidAfter',
      'tokensValidAfter must be a whole second in UTC, like 2024-01-31T12:00:01.000Z.',
    )
  errors.throwIfAny()
  const shape = {
    id,
    status,
    createdAt,
    updatedAt,
    version,
    ...(Object.hasOwn(value, 'tokensValidAfter') ? { tokensValidAfter } : {}),
  } as Pick<User, 'id' | 'status' | 'createdAt' | 'updatedAt' | 'version' | 'tokensValidAfter'>
  // The output-only fields may echo the values just checked; email, name and metadata follow the API's rules.
  const input = validateReplace(value, { ...shape, email: '', name: '', metadata: {} })
  return { ...shape, ...input }
}

/** A new user (email, name and metadata only): a fresh id, pending, as POST /users makes it. */
function toNewUser(value: unknown, newId: IdGenerator, now: () => number): User {
  const input = validateCreate(value)
  const { id, ms } = newId(now())
  const at = new Date(ms).toISOString()
  return { id, ...input, status: 'pending', createdAt: at, updatedAt: at, version: 1 }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
