import { foldFinalSigma, toSearchText } from '../../domain/user.js'
import type { ListPage, ListQuery } from '../store.js'
import type { Statement } from './connection.js'
import type { QueryResult, QueryResultRow } from './pg-types.js'
import { type SearchRow, toUserRecord, type UserRow, withMore } from './rows.js'
import { pageShape, searchShape, USER_COLUMNS } from './sql.js'

/** Runs one statement (the connection's query, with its failure classification). */
export type RunQuery = <R extends QueryResultRow>(statement: Statement) => Promise<QueryResult<R>>

/**
 * A list page (docs/api.md, Listing) from the database: by email (at most one user), by status
 * and id range, or a `q` search bounded by the scan budget. The query is already checked
 * (checkStorableQuery).
 */
export async function listUsers(query: ListQuery, run: RunQuery): Promise<ListPage> {
  const { email, q } = query.filter
  const statuses =
    query.filter.statuses === undefined ? undefined : [...new Set(query.filter.statuses)]
  if (email !== undefined) return listByEmail(query, email.toLowerCase(), run)
  const shape = { order: query.order, after: query.after, statuses }
  if (q === undefined) {
    const rows = (await run<UserRow>(pageShape(shape, query.limit))).rows
    const items = rows.slice(0, query.limit).map(toUserRecord)
    if (rows.length <= query.limit) return { items, hasMore: false }
    return withMore(items, items.at(-1)?.user.id ?? query.after)
  }
  const budget = Math.max(1, query.scanBudget ?? Number.MAX_SAFE_INTEGER - 1)
  const rows = (await run<SearchRow>(searchShape(shape, query.limit, budget, toSearchText(q)))).rows
  const hits = rows.filter((row) => row.hit)
  if (hits.length > query.limit) {
    const items = hits.slice(0, query.limit).map(toUserRecord)
    return withMore(items, items.at(-1)?.user.id ?? query.after)
  }
  const items = hits.map(toUserRecord)
  // A user past the budget exists: the walk goes on after the last one examined.
  const beyond = rows.some((row) => !row.hit && Number(row.position) === budget + 1)
  if (!beyond) return { items, hasMore: false }
  return withMore(items, rows.find((row) => !row.hit && Number(row.position) === budget)?.id)
}

/** An email names at most one user: look it up, then apply the other filters to it. */
async function listByEmail(query: ListQuery, emailKey: string, run: RunQuery): Promise<ListPage> {
  const result = await run<UserRow>({
    name: 'users_by_email',
    text: `SELECT ${USER_COLUMNS} FROM users WHERE email_key = $1`,
    values: [emailKey],
  })
  const row = result.rows[0]
  if (row === undefined) return { items: [], hasMore: false }
  const record = toUserRecord(row)
  const { statuses, q } = query.filter
  const { after, order } = query
  const needle = q === undefined ? undefined : toSearchText(q)
  const found =
    (after === undefined || (order === 'asc' ? row.id > after : row.id < after)) &&
    (statuses === undefined || statuses.includes(row.status)) &&
    (needle === undefined ||
      foldFinalSigma(record.emailKey).includes(needle) ||
      toSearchText(row.name).includes(needle))
  return { items: found ? [record] : [], hasMore: false }
}
