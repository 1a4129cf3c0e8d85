import { createHmac, timingSafeEqual } from 'node:crypto'

import { ServiceError } from '../domain/errors.js'
import { USER_STATUSES, type UserStatus } from '../domain/user.js'
import { isCanonicalUuid } from '../domain/uuid7.js'

export const SORTS = ['createdAt', '-createdAt'] as const
export type Sort = (typeof SORTS)[number]

/** Where a page ended, and the filters and sort the walk was started with. */
export interface CursorState {
  readonly after: string
  readonly sort: Sort
  readonly statuses: readonly UserStatus[] | undefined
  readonly email: string | undefined
  readonly q: string | undefined
}

export interface CursorCodec {
  encode(state: CursorState): string
  /** The state a cursor carries, or a 400 naming `cursor`. */
  decode(text: string): CursorState
}

/**
 * Opaque, tamper-evident cursors: JSON, base64url, and an HMAC under a key derived from the
 * service's secret, so that they outlive a restart but not a change of secret or service.
 */
export function createCursorCodec(secret: Buffer): CursorCodec {
  const key = createHmac('sha256', secret).update('user-service cursor key v1').digest()
  const sign = (payload: string): Buffer => createHmac('sha256', key).update(payload).digest()

  return {
    encode(state) {
      const payload = Buffer.from(
        JSON.stringify([
          1,
          state.after,
          state.sort,
          state.statuses ?? null,
          state.email ?? null,
          state.q ?? null,
        ]),
      ).toString('base64url')
      return `${payload}.${sign(payload).toString('base64url')}`
    },
    decode(text) {
      const [payload, signature, ...rest] = text.split('.')
      if (payload === undefined || signature === undefined || rest.length > 0) throw badCursor()
      const expected = sign(payload)
      const given = Buffer.from(signature, 'base64url')
      if (
        given.toString('base64url') !== signature ||
        given.length !== expected.length ||
        !timingSafeEqual(given, expected)
      ) {
        throw badCursor()
      }
      return parseState(Buffer.from(payload, 'base64url').toString('utf8'))
    },
  }
}

function parseState(json: string): CursorState {
  let value: unknown
  // biome-ignore format: the Stryker directive must stay on the line before `catch`
  try {
    value = JSON.parse(json)
  }
  // Stryker disable next-line BlockStatement: without it value stays undefined, which the array check below refuses alike
  catch {
    throw badCursor()
  }
  if (!Array.isArray(value) || value.length !== 6 || value[0] !== 1) throw badCursor()
  const [, after, sort, statuses, email, q] = value as unknown[]
  if (typeof after !== 'string' || !isCanonicalUuid(after)) throw badCursor()
  if (!SORTS.some((candidate) => candidate === sort)) throw badCursor()
  return {
    after,
    sort: sort as Sort,
    statuses: statuses === null ? undefined : parseStatuses(statuses),
    email: optionalString(email),
    q: optionalString(q),
  }
}

function parseStatuses(value: unknown): UserStatus[] {
  if (!Array.isArray(value)) throw badCursor()
  return value.map((item: unknown) => {
    const status = USER_STATUSES.find((candidate) => candidate === item)
    if (status === undefined) throw badCursor()
    return status
  })
}

function optionalString(value: unknown): string | undefined {
  if (value === null) return undefined
  if (typeof value !== 'string') throw badCursor()
  return value
}

function badCursor(): ServiceError {
  return new ServiceError(
    'bad_request',
    'The query parameter cursor is not a cursor this service made.',
  )
}
