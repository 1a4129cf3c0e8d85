import { HttpError } from '../errors.js'
import { matchesIfMatch } from '../http/conditional.js'
import type { ListPage, ListQuery, Store } from '../store/store.js'
import { nextStatus, type LifecycleAction } from './lifecycle.js'
import type { User, UserRecord } from './user.js'
import { createIdGenerator, isCanonicalUuid, type IdGenerator } from './uuid7.js'
import {
  validateCreate, validateEmptyBody, validatePatch, validateReplace, type UserInput,
} from './validate-user.js'

export interface UserOperationsOptions {
  store: Store
  /** Milliseconds since the epoch. */
  now: () => number
  newId?: IdGenerator
}

/** What can be done to users, independent of HTTP: rules, preconditions and the lifecycle. */
export interface UserOperations {
  list(query: ListQuery): Promise<ListPage>
  get(id: string): Promise<UserRecord>
  create(body: unknown): Promise<UserRecord>
  replace(id: string, body: unknown, ifMatch: string | undefined): Promise<UserRecord>
  patch(id: string, body: unknown, ifMatch: string | undefined): Promise<UserRecord>
  remove(id: string, ifMatch: string | undefined): Promise<void>
  transition(id: string, action: LifecycleAction, body: unknown, ifMatch: string | undefined): Promise<UserRecord>
  /**
   * True when `sub` names a suspended user, whose tokens are refused everywhere. Answers at once
   * (without a promise) for subjects that cannot be user ids.
   */
  isSuspended(sub: string): boolean | Promise<boolean>
}

export function createUserOperations(options: UserOperationsOptions): UserOperations {
  const { store, now } = options
  const newId = options.newId ?? createIdGenerator()

  /** Runs a change under the store's lock: 404, then 412, then the change's own checks. */
  const change = (id: string, ifMatch: string | undefined, next: (current: User) => User | undefined): Promise<UserRecord> => {
    requireUserId(id)
    return store.update(id, (current) => {
      checkIfMatch(current, ifMatch)
      return next(current.user)
    })
  }

  const touch = (current: User, fields: Partial<Pick<User, 'email' | 'name' | 'metadata' | 'status'>>): User => ({
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
      return store.get(id).then((record) => record ?? Promise.reject(notFound()))
    },

    create(body) {
      const input = validateCreate(body)
      const { id, ms } = newId(now())
      const at = new Date(ms).toISOString()
      return store.create({ id, ...input, status: 'pending', createdAt: at, updatedAt: at, version: 1 })
    },

    replace: (id, body, ifMatch) => change(id, ifMatch, (current) => apply(current, validateReplace(body, current))),

    patch: (id, body, ifMatch) => change(id, ifMatch, (current) => apply(current, validatePatch(body, current))),

    transition: (id, action, body, ifMatch) => change(id, ifMatch, (current) => {
      validateEmptyBody(body)
      const status = nextStatus(current.status, action)
      return status === current.status ? undefined : touch(current, { status })
    }),

    remove(id, ifMatch) {
      requireUserId(id)
      return store.delete(id, (current) => { checkIfMatch(current, ifMatch) })
    },

    isSuspended(sub) {
      // Most subjects are not user ids at all: answer without a store call.
      if (!isCanonicalUuid(sub)) return false
      return store.get(sub).then((record) => record?.user.status === 'suspended')
    },
  }
}

/** Ids are canonical UUIDs; anything else names no user and never reaches the store. */
function requireUserId(id: string): void {
  if (!isCanonicalUuid(id)) throw notFound()
}

function notFound(): HttpError {
  return new HttpError('not_found', 'There is no user with this id.')
}

function checkIfMatch(current: UserRecord, ifMatch: string | undefined): void {
  if (ifMatch === undefined || matchesIfMatch(ifMatch, current.etag)) return
  throw new HttpError('precondition_failed', `If-Match does not match the current ETag ${current.etag}.`)
}

function sameInput(current: User, input: UserInput): boolean {
  if (current.email !== input.email || current.name !== input.name) return false
  const keys = Object.keys(current.metadata)
  if (keys.length !== Object.keys(input.metadata).length) return false
  return keys.every((key) => Object.hasOwn(input.metadata, key) && input.metadata[key] === current.metadata[key])
}
