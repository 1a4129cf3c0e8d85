import { USER_STATUSES, type UserRecord } from '../../domain/user.js'
import { HttpError } from '../../http/problem.js'
import type { Reply } from '../../http/respond.js'
import { SORTS } from '../../users/cursor.js'
import { commaList, NOT_BLANK, userIdList } from '../parameter-schemas.js'
import { type Json, type Route, type RouteContext, ref } from '../route.js'
import { API_ROUTE } from '../route-defaults.js'
import { DEFAULT_LIMIT, MAX_IDS, MAX_LIMIT, parseListQuery } from './list-query.js'

/** `GET /users`: a page of users, filtered and sorted, or a batch get by ids (docs/bulk.md). */
export const listUsers: Route = {
  ...API_ROUTE,
  operationId: 'listUsers',
  method: 'GET',
  path: '/users',
  scope: 'users:read',
  cacheable: true,
  summary: 'List users, a page at a time',
  parameters: listParameters(),
  responses: {
    200: {
      description: 'A page of users; a page with more after it carries Link rel="next".',
      headers: ['Link'],
      content: { 'application/json': ref('UserPage') },
    },
  },
  async handle(context) {
    const { operations, cursors, basePath, scanBudget } = context.services
    const { query, walk, ids } = parseListQuery(context.rawQuery, cursors)
    if (ids !== undefined) return batchPage(ids, await fetchMany(context, ids))
    const page = await operations.list({ ...query, scanBudget })
    // A page cut short by the scan budget may be empty and still say where to go on.
    const resumeAfter = page.resumeAfter ?? page.items[page.items.length - 1]?.user.id
    const nextCursor =
      page.hasMore && resumeAfter !== undefined
        ? cursors.encode({ ...walk, after: resumeAfter })
        : null
    const body = `{"items":[${page.items.map((record) => record.json).join(',')}],"nextCursor":${JSON.stringify(nextCursor)}}`
    if (nextCursor === null) return { status: 200, body }
    const next = `${basePath}/users?limit=${query.limit}&cursor=${nextCursor}`
    return { status: 200, body, headers: { link: `<${next}>; rel="next"` } }
  },
}

/** The users of these ids that exist: the store's batch get, or one get per id. */
async function fetchMany(
  context: RouteContext,
  ids: readonly string[],
): Promise<readonly UserRecord[]> {
  const { getMany, operations } = context.services
  if (getMany !== undefined) return getMany(ids)
  const found = await Promise.all(
    ids.map((one) =>
      operations.get(one).catch((error: unknown) => {
        if (error instanceof HttpError && error.code === 'not_found') return undefined
        throw error
      }),
    ),
  )
  return found.filter((record) => record !== undefined)
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

function listParameters(): Json[] {
  const query = (name: string, schema: Json, description: string): Json => ({
    name,
    in: 'query',
    required: false,
    schema,
    description,
  })
  const repeated =
    'Each parameter at most once; an unknown, empty or malformed one is 400 bad_request.'
  return [
    query(
      'limit',
      { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT },
      `Users per page. ${repeated}`,
    ),
    query(
      'cursor',
      { type: 'string', ...NOT_BLANK },
      'The nextCursor of the previous page; it carries its filters and sort, so it may be sent alone. Filters or sort that differ from its own are 400.',
    ),
    query('status', commaList(USER_STATUSES.join('|')), 'One status or a comma list.'),
    query('email', { type: 'string', ...NOT_BLANK }, 'Exact match, case-insensitive.'),
    query(
      'q',
      { type: 'string', maxLength: 200, ...NOT_BLANK },
      'Case-insensitive substring of name or email (lower case, a final sigma read as σ).',
    ),
    query(
      'sort',
      { type: 'string', enum: SORTS, default: 'createdAt' },
      'Creation order, oldest or newest first.',
    ),
    query(
      'ids',
      userIdList(MAX_IDS),
      `A batch get: a comma list of up to ${MAX_IDS} user ids; the users that exist, in the order asked, as one page (nextCursor null). Unknown ids are left out; a malformed id, or any other parameter beside it, is 400.`,
    ),
  ]
}
