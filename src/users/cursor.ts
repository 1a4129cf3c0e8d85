import { ServiceError } from '../domain/errors.js'
import { createSealedJson } from '../domain/sealed-json.js'
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
 * Opaque, tamper-evident cursors (domain/sealed-json.ts), so that they outlive a restart but not a
 * change of secret or service.
 */
export function createCursorCodec(secret: Buffer): CursorCodec {
  const sealed = createSealedJson(secret, 'user-service cursor key v1')
  return {
    encode(state) {
      return sealed.seal([
        1,
        state.after,
        state.sort,
        state.statuses ?? null,
        state.email ?? null,
        state.q ?? null,
      ])
    },
    decode(text) {
      return parseState(sealed.open(text))
    },
  }
}

function parseState(value: unknown): CursorState {
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
