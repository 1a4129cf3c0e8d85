import { USER_STATUSES, type UserStatus } from '../../domain/user.js'
import { isCanonicalUuid } from '../../domain/uuid7.js'
import { badParameter, readQueryParameters } from '../../http/query-parameters.js'
import type { ListQuery } from '../../store/store.js'
import { type CursorCodec, type CursorState, SORTS, type Sort } from '../../users/cursor.js'

export const LIST_PARAMETERS = ['limit', 'cursor', 'status', 'email', 'q', 'sort', 'ids'] as const
type Parameter = (typeof LIST_PARAMETERS)[number]

export const DEFAULT_LIMIT = 20
export const MAX_LIMIT = 100
const MAX_Q_LENGTH = 200

/** A parsed `GET /users` query: what to ask the store, and what the next cursor must carry. */
export interface ListRequest {
  readonly query: ListQuery
  readonly walk: Omit<CursorState, 'after'>
  /** A batch get (`?ids=`, docs/bulk.md): these users in this order, one page; nothing else is asked. */
  readonly ids?: readonly string[]
}

/** The most ids one batch get may name. */
export const MAX_IDS = 100

/**
 * Parses the raw query string strictly: unknown, repeated, empty or malformed parameters are a
 * 400 naming the parameter. A cursor brings its filters and sort; others sent with it must agree.
 */
export function parseListQuery(rawQuery: string, cursors: CursorCodec): ListRequest {
  const params = readQueryParameters(rawQuery, LIST_PARAMETERS, 'this list')
  refuseNul(params)
  const idsText = params.get('ids')
  if (idsText !== undefined) return parseIds(idsText, params)
  const limit = parseLimit(params.get('limit'))
  const given: Omit<CursorState, 'after'> = {
    sort: parseSort(params.get('sort')),
    statuses: parseStatuses(params.get('status')),
    email: params.get('email')?.trim().toLowerCase(),
    q: parseQ(params.get('q')),
  }
  const cursorText = params.get('cursor')
  if (cursorText === undefined) return { query: toQuery(given, undefined, limit), walk: given }
  const cursor = cursors.decode(cursorText)
  const differs: string[] = []
  if (params.has('sort') && given.sort !== cursor.sort) differs.push('sort')
  if (given.statuses !== undefined && String(given.statuses) !== String(cursor.statuses))
    differs.push('status')
  if (given.email !== undefined && given.email !== cursor.email) differs.push('email')
  if (given.q !== undefined && given.q !== cursor.q) differs.push('q')
  if (differs.length > 0) {
    const names = differs.join(', ')
    throw badParameter(
      'cursor',
      `was made for other ${names}; send it alone or with the same filters and sort`,
    )
  }
  return { query: toQuery(cursor, cursor.after, limit), walk: cursor }
}

/**
 * No store can take a NUL (PostgreSQL's text cannot hold one), and no stored name or email holds
 * one: refused here, so that every store answers alike and none ever sees it.
 */
function refuseNul(params: ReadonlyMap<Parameter, string>): void {
  for (const [name, value] of params) {
    if (value.includes('\u0000'))
      throw badParameter(name, 'must not contain a NUL character (U+0000)')
  }
}

function toQuery(
  walk: Omit<CursorState, 'after'>,
  after: string | undefined,
  limit: number,
): ListQuery {
  return {
    filter: {
      ...(walk.statuses === undefined ? {} : { statuses: walk.statuses }),
      ...(walk.email === undefined ? {} : { email: walk.email }),
      ...(walk.q === undefined ? {} : { q: walk.q }),
    },
    order: walk.sort === 'createdAt' ? 'asc' : 'desc',
    ...(after === undefined ? {} : { after }),
    limit,
  }
}

/** A batch get names its users and nothing else: any other parameter is a conflict. */
function parseIds(text: string, params: ReadonlyMap<Parameter, string>): ListRequest {
  const others = [...params.keys()].filter((name) => name !== 'ids')
  if (others.length > 0) throw badParameter('ids', `cannot be combined with ${others.join(', ')}`)
  const ids: string[] = []
  const seen = new Set<string>()
  const items = text.split(',')
  // Counted before any work, so that a hostile list costs no more than its first check.
  if (items.length > MAX_IDS) throw badParameter('ids', `must name at most ${MAX_IDS} users`)
  for (const item of items) {
    const id = item.trim()
    if (!isCanonicalUuid(id))
      throw badParameter('ids', 'must be a comma list of user ids (lower-case UUIDs)')
    // Named twice, shown once: the page holds each user at most once.
    if (seen.has(id)) continue
    seen.add(id)
    ids.push(id)
  }
  const walk: Omit<CursorState, 'after'> = {
    sort: 'createdAt',
    statuses: undefined,
    email: undefined,
    q: undefined,
  }
  return { query: toQuery(walk, undefined, MAX_IDS), walk, ids }
}

function parseLimit(text: string | undefined): number {
  if (text === undefined) return DEFAULT_LIMIT
  const limit = /^\d{1,3}$/.test(text) ? Number(text) : Number.NaN
  if (!(limit >= 1 && limit <= MAX_LIMIT))
    throw badParameter('limit', `must be a whole number from 1 to ${MAX_LIMIT}`)
  return limit
}

function parseSort(text: string | undefined): Sort {
  if (text === undefined) return 'createdAt'
  const sort = SORTS.find((candidate) => candidate === text)
  if (sort === undefined) throw badParameter('sort', `must be ${SORTS.join(' or ')}`)
  return sort
}

function parseStatuses(text: string | undefined): UserStatus[] | undefined {
  if (text === undefined) return undefined
  const statuses = new Set<UserStatus>()
  for (const item of text.split(',')) {
    const status = USER_STATUSES.find((candidate) => candidate === item.trim())
    if (status === undefined)
      throw badParameter('status', `must be a comma list of ${USER_STATUSES.join(', ')}`)
    statuses.add(status)
  }
  // Sorted, so that `active,pending` and `pending,active` are the same walk.
  return [...statuses].sort()
}

function parseQ(text: string | undefined): string | undefined {
  if (text === undefined) return undefined
  // Code points, as every other length rule counts (a UTF-16 length would refuse 150 emoji).
  if (text.length > MAX_Q_LENGTH && [...text].length > MAX_Q_LENGTH) {
    throw badParameter('q', `must have at most ${MAX_Q_LENGTH} characters`)
  }
  return text.toLowerCase()
}
