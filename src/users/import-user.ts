import { type FieldError, ServiceError } from '../domain/errors.js'
import { isUserStatus, type User } from '../domain/user.js'
import { type IdGenerator, isCanonicalUuid } from '../domain/uuid7.js'
import { validateCreate, validateReplace } from './validate-user.js'

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

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
  const { id, status, createdAt, updatedAt, version } = value
  const errors: FieldError[] = []
  const wrong = (pointer: string, message: string): void => {
    errors.push({ pointer, code: 'invalid_format', message })
  }
  if (typeof id !== 'string' || !isCanonicalUuid(id)) wrong('/id', 'id must be a lower-case UUID.')
  if (!isUserStatus(status)) wrong('/status', 'status must be pending, active or suspended.')
  for (const [key, stamp] of [
    ['createdAt', createdAt],
    ['updatedAt', updatedAt],
  ] as const) {
    if (typeof stamp !== 'string' || !TIMESTAMP.test(stamp) || Number.isNaN(Date.parse(stamp))) {
      wrong(`/${key}`, `${key} must be a UTC time stamp like 2024-01-31T12:00:00.000Z.`)
    }
  }
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1)
    wrong('/version', 'version must be a whole number of at least 1.')
  if (errors.length > 0)
    throw new ServiceError('validation_failed', 'The user is not valid.', { errors })
  const shape = { id, status, createdAt, updatedAt, version } as Pick<
    User,
    'id' | 'status' | 'createdAt' | 'updatedAt' | 'version'
  >
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
