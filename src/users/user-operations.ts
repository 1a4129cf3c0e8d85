import type { ChangeContext } from '../domain/change-context.js'
import { ServiceError } from '../domain/errors.js'
import { type LifecycleAction, nextStatus } from '../domain/lifecycle.js'
import { sameMetadata } from '../domain/metadata.js'
import { type Preconditions, requirePreconditions } from '../domain/preconditions.js'
import type { User, UserRecord } from '../domain/user.js'
import { createIdGenerator, type IdGenerator, isCanonicalUuid } from '../domain/uuid7.js'
import type { ListPage, ListQuery, Store, SubjectState } from '../store/store.js'
import {
  type UserInput,
  validateCreate,
  validateEmptyBody,
  validatePatch,
  validateReplace,
} from './validate-user.js'

export interface UserOperationsOptions {
  store: Store
  /** Milliseconds since the epoch. */
  now: () => number
  newId?: IdGenerator
  /**
   * Runs at the moment a change is about to be written (inside the store's lock for the user) and
   * throws to refuse it: how maintenance stops writes that were already in flight.
   */
  writeGate?: () => void
}

/** A user read together with the check of the token's subject (getAs). */
export interface CheckedRead {
  /** Why the token is refused (subjectRefusal's verdict), or undefined. */
  readonly refusal: ServiceError | undefined
  /** The user: for the route to answer once the refusal and the scope were checked. */
  readonly user: () => UserRecord
}

/** What can be done to users, independent of HTTP: rules, preconditions and the lifecycle. */
export interface UserOperations {
  list(query: ListQuery): Promise<ListPage>
  /** The user. A read's preconditions are the caller's, on the answer (http/conditional-request.ts). */
  get(id: string): Promise<UserRecord>
  /**
   * The writes take who makes them (`context`: the token's subject and the request id), which the
   * store puts in the change's event; `{}` for a write outside a request.
   */
  create(body: unknown, context: ChangeContext): Promise<UserRecord>
  replace(
    id: string,
    body: unknown,
    conditions: Preconditions,
    context: ChangeContext,
  ): Promise<UserRecord>
  patch(
    id: string,
    body: unknown,
    conditions: Preconditions,
    context: ChangeContext,
  ): Promise<UserRecord>
  remove(id: string, conditions: Preconditions, context: ChangeContext): Promise<void>
  transition(
    id: string,
    action: LifecycleAction,
    body: unknown,
    conditions: Preconditions,
    context: ChangeContext,
  ): Promise<UserRecord>
  /**
   * Sets the user's tokensValidAfter to the start of the next whole second (never earlier than
   * it was): its tokens issued before are refused from then on. A repeat within the second
   * changes nothing.
   */
  revokeTokens(
    id: string,
    body: unknown,
    conditions: Preconditions,
    context: ChangeContext,
  ): Promise<UserRecord>
  /**
   * Why a token of `sub` issued at `iat` (seconds; undefined when it has none) is refused, or
   * undefined when it is not: token_revoked, subject_suspended or subject_deleted. Undefined,
   * without a promise, for subjects that cannot be user ids.
   */
  subjectRefusal(
    sub: string,
    iat: number | undefined,
  ): Promise<ServiceError | undefined> | undefined
  /**
   * get(id) and subjectRefusal(sub, iat) from one store call (one round trip to PostgreSQL):
   * `user` throws not_found when there is no such user. Undefined, without a promise, when `sub`
   * cannot be a user id (there is no subject to check: call get) or `id` is not a canonical id as
   * given (call get, which decides).
   */
  getAs(id: string, sub: string, iat: number | undefined): Promise<CheckedRead> | undefined
  /** subjectRefusal as a rejection, for the checks that have no scope to place between. */
  checkSubject(sub: string, iat: number | undefined): Promise<void> | undefined
}

/**
 * A revocation's value is the second after the one its change is made in, and must be the second
 * after the one its 200 is sent in: a token issued in that second, before or after the answer, is
 * refused. The change is durable some milliseconds after its value is set, so a revocation asked
 * for in the last REVOKE_WRITE_BUDGET_MS of a second waits for the next one first: its write then
 * has at least that long to be answered within the second its value follows (docs/api.md).
 */
export const REVOKE_WRITE_BUDGET_MS = 250

function clearOfSecondEnd(now: () => number): Promise<void> | undefined {
  const at = now()
  if (1000 - (at % 1000) >= REVOKE_WRITE_BUDGET_MS) return undefined
  return secondAfter(Math.floor(at / 1000), now)
}

/**
 * Waits until the clock has left `second`. A timer runs on Node's own clock (whole milliseconds of
 * a monotonic one), not on Date.now(): set to the distance to the second's end, it may fire while
 * Date.now() still reads that second.
 */
async function secondAfter(second: number, now: () => number): Promise<void> {
  // A few rounds at most: a clock that stands still (a test's) must not hold the request for ever.
  for (let round = 0, at = now(); round < 5 && Math.floor(at / 1000) === second; round += 1) {
    await new Promise((resolve) => setTimeout(resolve, 1000 - (at % 1000)))
    at = now()
  }
}

export function createUserOperations(options: UserOperationsOptions): UserOperations {
  const { store, now } = options
  const newId = options.newId ?? createIdGenerator()
  const writeGate = options.writeGate ?? ((): void => undefined)

  /** Runs a change under the store's lock: not_found, then precondition_failed, then the change's own checks. */
  const change = (
    id: string,
    conditions: Preconditions,
    context: ChangeContext,
    next: (current: User) => User | undefined,
  ): Promise<UserRecord> => {
    requireUserId(id)
    return store.update(
      id,
      (current) => {
        checkWritePreconditions(current, conditions)
        const changed = next(current.user)
        if (changed !== undefined) writeGate()
        return changed
      },
      context,
    )
  }

  const touch = (
    current: User,
    fields: Partial<Pick<User, 'email' | 'name' | 'metadata' | 'status' | 'tokensValidAfter'>>,
  ): User => ({
    ...current,
    ...fields,
    // Never before the previous change, even if the clock steps back.
    updatedAt: new Date(Math.max(now(), Date.parse(current.updatedAt))).toISOString(),
    version: current.version + 1,
  })

  const apply = (current: User, input: UserInput): User | undefined =>
    sameInput(current, input) ? undefined : touch(current, input)

  return {
    list: (query) => store.list(query),

    get(id) {
      requireUserId(id)
      return store.get(id).then((record) => {
        if (record === undefined) throw notFound()
        return record
      })
    },

    create(body, context) {
      const input = validateCreate(body)
      const { id, ms } = newId(now())
      const at = new Date(ms).toISOString()
      return store.create(
        { id, ...input, status: 'pending', createdAt: at, updatedAt: at, version: 1 },
        writeGate,
        context,
      )
    },

    replace: (id, body, conditions, context) =>
      change(id, conditions, context, (current) => apply(current, validateReplace(body, current))),

    patch: (id, body, conditions, context) =>
      change(id, conditions, context, (current) => apply(current, validatePatch(body, current))),

    transition: (id, action, body, conditions, context) =>
      change(id, conditions, context, (current) => {
        validateEmptyBody(body)
        const status = nextStatus(current.status, action)
        return status === current.status ? undefined : touch(current, { status })
      }),

    revokeTokens: async (id, body, conditions, context) => {
      await clearOfSecondEnd(now)
      return change(id, conditions, context, (current) => {
        validateEmptyBody(body)
        const next = (Math.floor(now() / 1000) + 1) * 1000
        const previous =
          current.tokensValidAfter === undefined ? 0 : Date.parse(current.tokensValidAfter)
        return next > previous
          ? touch(current, { tokensValidAfter: new Date(next).toISOString() })
          : undefined
      })
    },

    remove(id, conditions, context) {
      requireUserId(id)
      return store.delete(
        id,
        (current) => {
          checkWritePreconditions(current, conditions)
          writeGate()
        },
        context,
      )
    },

    subjectRefusal,

    getAs(id, sub, iat) {
      if (!isCanonicalUuid(sub) || !isCanonicalUuid(id)) return undefined
      return store.getAs(id, sub).then(({ record, subject }) => ({
        refusal: refusalOf(subject, iat),
        user: () => {
          if (record === undefined) throw notFound()
          return record
        },
      }))
    },

    checkSubject(sub, iat) {
      return subjectRefusal(sub, iat)?.then((refusal) => {
        if (refusal !== undefined) throw refusal
      })
    },
  }

  function subjectRefusal(
    sub: string,
    iat: number | undefined,
  ): Promise<ServiceError | undefined> | undefined {
    // Most subjects are not user ids at all: answer without a store call.
    if (!isCanonicalUuid(sub)) return undefined
    return store.subjectOf(sub).then((subject) => refusalOf(subject, iat))
  }
}

/** Why a token issued at `iat` is refused, given its subject's stored state, or undefined. */
function refusalOf(
  { status, deleted, tokensValidAfter }: SubjectState,
  iat: number | undefined,
): ServiceError | undefined {
  // 401 before 403: a revoked token is refused as a token, whatever its subject's status.
  if (tokensValidAfter !== undefined && !issuedSince(iat, tokensValidAfter)) {
    return new ServiceError(
      'token_revoked',
      "The token was revoked: it was issued before its subject's tokensValidAfter.",
    )
  }
  if (status === 'suspended')
    return new ServiceError('subject_suspended', 'The subject of this token is a suspended user.')
  if (deleted)
    return new ServiceError('subject_deleted', 'The subject of this token is a deleted user.')
  return undefined
}

/** Whether a token issued at `iat` (seconds) is at or after `validAfter`, in whole seconds. */
function issuedSince(iat: number | undefined, validAfter: string): boolean {
  return iat !== undefined && Math.floor(iat) * 1000 >= Date.parse(validAfter)
}

/** Ids are canonical UUIDs; anything else names no user and never reaches the store. */
function requireUserId(id: string): void {
  if (!isCanonicalUuid(id)) throw notFound()
}

function notFound(): ServiceError {
  return new ServiceError('not_found', 'There is no user with this id.')
}

/**
 * A write goes ahead only when If-Match matches and If-None-Match does not (`*` included): checked
 * here, under the store's lock for the user, so that two writers with one tag cannot both pass.
 */
function checkWritePreconditions(current: UserRecord, conditions: Preconditions): void {
  requirePreconditions(conditions, current.etag, false)
}

function sameInput(current: User, input: UserInput): boolean {
  if (current.email !== input.email || current.name !== input.name) return false
  return sameMetadata(current.metadata, input.metadata)
}
