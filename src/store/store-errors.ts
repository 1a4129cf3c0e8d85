import { ServiceError } from '../domain/errors.js'

/** The errors every store answers alike, so that the shared suite can hold them to one text. */

export function userNotFound(): ServiceError {
  return new ServiceError('not_found', 'There is no user with this id.')
}

export function duplicateEmail(): ServiceError {
  return new ServiceError('duplicate_email', 'Another user already has this email.')
}

/** A create whose id is (or was, before its delete) another user's. */
export function duplicateId(id: string): ServiceError {
  return new ServiceError('duplicate_id', `A user with the id ${id} already exists or existed.`)
}

/** Ids name files in the file store: only canonical UUIDs ever get that far. */
export function notCanonical(id: string): ServiceError {
  return new ServiceError(
    'validation_failed',
    `The id ${JSON.stringify(id)} is not a canonical UUID.`,
    {
      errors: [
        { pointer: '/id', code: 'invalid_format', message: 'id must be a lower-case UUID.' },
      ],
    },
  )
}
