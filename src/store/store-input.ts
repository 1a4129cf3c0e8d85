import { ServiceError } from '../domain/errors.js'
import type { ChangeContext } from '../domain/event.js'
import type { User } from '../domain/user.js'
import { MAX_USER_VERSION } from '../domain/user.js'
import type { ListQuery } from './store.js'

/**
 * What every store refuses before it writes or asks, so that all of them answer alike
 * (docs/api.md, limits): the memory store could hold these, PostgreSQL could not. A NUL (U+0000)
 * in text (PostgreSQL's text cannot hold it; metadata values may, json keeps it escaped), and a
 * version outside 1..MAX_USER_VERSION (the next is its deletion's). Each is the client's input:
 * a 4xx naming it, never a storage fault.
 */

const NUL = '\u0000'

/** A user about to be written: `current` is the record it replaces (undefined for a create). */
export function checkStorableUser(user: User, current: User | undefined): void {
  const { version } = user
  if (current !== undefined && version > MAX_USER_VERSION) {
    throw new ServiceError(
      'version_exhausted',
      `The user is at version ${current.version}, the highest a user reaches (${MAX_USER_VERSION}; the next is kept for its deletion): it cannot change any more, only be deleted.`,
    )
  }
  if (!Number.isSafeInteger(version) || version < 1 || version > MAX_USER_VERSION) {
    throw fieldError(
      '/version',
      'out_of_range',
      `version must be a whole number from 1 to ${MAX_USER_VERSION}.`,
    )
  }
  for (const key of ['email', 'name'] as const) {
    if (user[key].includes(NUL)) {
      throw fieldError(
        `/${key}`,
        'invalid_characters',
        `${key} must not contain a NUL character (U+0000).`,
      )
    }
  }
}

/** The text of a list page: its filters, and where it starts (which a client sends as its cursor). */
export function checkStorableQuery(query: ListQuery): void {
  for (const key of ['email', 'q'] as const) {
    if (query.filter[key]?.includes(NUL) === true) throw nulParameter(key)
  }
  if (query.after?.includes(NUL) === true) throw nulParameter('cursor')
}

/** Who made a change: the token's `sub` and the request id end up in the event. */
export function checkStorableContext(context: ChangeContext | undefined): void {
  if (context?.actor?.includes(NUL) === true) {
    throw new ServiceError(
      'bad_request',
      'The token subject must not contain a NUL character (U+0000).',
    )
  }
  if (context?.requestId?.includes(NUL) === true) {
    throw new ServiceError(
      'bad_request',
      'The request id must not contain a NUL character (U+0000).',
    )
  }
}

function nulParameter(name: string): ServiceError {
  return new ServiceError(
    'bad_request',
    `The query parameter ${name} must not contain a NUL character (U+0000).`,
  )
}

function fieldError(pointer: string, code: string, message: string): ServiceError {
  return new ServiceError('validation_failed', `The request breaks the rules of: ${pointer}.`, {
    errors: [{ pointer, code, message }],
  })
}
