import { ServiceError } from '../domain/errors.js'
import type { Handler, HandlerContext } from '../http/handler.js'
import { evaluatePreconditions, type Preconditions } from '../domain/preconditions.js'
import type { Reply } from '../http/respond.js'
import type { CursorCodec } from './cursor.js'
import type { LifecycleAction } from '../domain/lifecycle.js'
import { parseListQuery } from './list-query.js'
import type { UserRecord } from '../domain/user.js'
import type { UserOperations } from './user-operations.js'

export type UserOperationId =
  | 'listUsers' | 'createUser' | 'getUser' | 'replaceUser' | 'updateUser' | 'deleteUser'
  | 'activateUser' | 'suspendUser'

export interface UserRoutesOptions {
  operations: UserOperations
  cursors: CursorCodec
  basePath: string
  /** The most users a `q` page examines before it answers (§9); undefined: no bound. */
  scanBudget?: number | undefined
  /** The users of these ids that exist, in any order (a batch get); undefined: one get per id. */
  getMany?: ((ids: readonly string[]) => Promise<readonly UserRecord[]>) | undefined
}

/** The handlers of the `/users` routes: HTTP in and out around the user operations. */
export function createUserHandlers(options: UserRoutesOptions): Record<UserOperationId, Handler> {
  const { operations, cursors, basePath, scanBudget } = options
  const fetchMany = options.getMany ?? ((ids: readonly string[]) => Promise.all(ids.map((one) =>
    operations.get(one, { ifMatch: undefined, ifNoneMatch: undefined }).catch((error: unknown) => {
      if (error instanceof ServiceError && error.code === 'not_found') return undefined
      throw error
    }))).then((found) => found.filter((record) => record !== undefined)))
  const transition = (action: LifecycleAction): Handler => async (context) =>
    userReply(200, await operations.transition(id(context), action, context.body, preconditions(context), context.change))

  return {
    async listUsers(context) {
      const { query, walk, ids } = parseListQuery(context.rawQuery, cursors)
      if (ids !== undefined) return batchPage(ids, await fetchMany(ids))
      const page = await operations.list(scanBudget === undefined ? query : { ...query, scanBudget })
      // A page cut short by the scan budget may be empty and still say where to go on.
      const resumeAfter = page.resumeAfter ?? page.items[page.items.length - 1]?.user.id
      const nextCursor = page.hasMore && resumeAfter !== undefined ? cursors.encode({ ...walk, after: resumeAfter }) : null
      const body = `{"items":[${page.items.map((record) => record.json).join(',')}],"nextCursor":${JSON.stringify(nextCursor)}}`
      if (nextCursor === null) return { status: 200, body }
      const next = `${basePath}/users?limit=${query.limit}&cursor=${nextCursor}`
      return { status: 200, body, headers: { link: `<${next}>; rel="next"` } }
    },

    getUser(context) {
      const conditions = preconditions(context)
      // The hottest route: one promise, no async frames.
      return operations.get(id(context), conditions).then((record) =>
        conditions.ifNoneMatch !== undefined && evaluatePreconditions(conditions, record.etag, true) === 'not_modified'
          ? { status: 304, headers: { etag: record.etag } }
          : userReply(200, record))
    },

    async createUser(context) {
      const record = await operations.create(context.body, context.change)
      const reply = userReply(201, record)
      return { ...reply, headers: { ...reply.headers, location: `${basePath}/users/${record.user.id}` } }
    },

    async replaceUser(context) {
      return userReply(200, await operations.replace(id(context), context.body, preconditions(context), context.change))
    },

    async updateUser(context) {
      return userReply(200, await operations.patch(id(context), context.body, preconditions(context), context.change))
    },

    async deleteUser(context) {
      await operations.remove(id(context), preconditions(context), context.change)
      return { status: 204 }
    },

    activateUser: transition('activate'),
    suspendUser: transition('suspend'),
  }
}

/** The page of a batch get: the users found, in the order asked, and no next page. */
function batchPage(ids: readonly string[], found: readonly UserRecord[]): Reply {
  const byId = new Map(found.map((record) => [record.user.id, record]))
  const items: string[] = []
  for (const one of ids) {
    const record = byId.get(one)
    if (record !== undefined) items.push(record.json)
  }
  return { status: 200, body: `{"items":[${items.join(',')}],"nextCursor":null}` }
}

function userReply(status: number, record: UserRecord): Reply {
  return { status, body: record.json, headers: { etag: record.etag } }
}

function id(context: HandlerContext): string {
  return context.params['id'] ?? ''
}

function preconditions(context: HandlerContext): Preconditions {
  return { ifMatch: header(context, 'if-match'), ifNoneMatch: header(context, 'if-none-match') }
}

function header(context: HandlerContext, name: 'if-match' | 'if-none-match'): string | undefined {
  const value = context.headers[name]
  return typeof value === 'string' ? value : undefined
}
