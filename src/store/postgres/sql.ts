import type { UserStatus } from '../../domain/user.js'

/**
 * The SQL of list pages: a few fixed shapes, one per filter combination, each a named prepared
 * statement, so that the planner sees plain `id > $1` and `status = $2` conditions it can answer
 * from an index (never `$x IS NULL OR …`).
 */

export const USER_COLUMNS =
  'id, email, name, status, metadata::text AS metadata, created_at, updated_at, version, tokens_valid_after'

export interface SqlShape {
  readonly name: string
  readonly text: string
  readonly values: readonly unknown[]
}

export interface ShapeInput {
  readonly order: 'asc' | 'desc'
  readonly after: string | undefined
  /** Distinct statuses, or undefined for every user. */
  readonly statuses: readonly UserStatus[] | undefined
}

/**
 * Ids in `order` after `after`, of the given statuses, at most `$1` of them; the other parameters
 * start at $2. Several statuses are one index range each, merged: O(limit) whatever they hold.
 */
function source(
  input: ShapeInput,
  columns: string,
): { text: string; values: unknown[]; key: string } {
  const direction = input.order === 'asc' ? 'ASC' : 'DESC'
  const compare = input.order === 'asc' ? '>' : '<'
  const values: unknown[] = []
  const param = (value: unknown): string => {
    values.push(value)
    return `$${values.length + 1}`
  }
  const afterParam = input.after === undefined ? undefined : param(input.after)
  const afterSql = afterParam === undefined ? '' : ` AND id ${compare} ${afterParam}`
  const statuses = input.statuses ?? []
  if (statuses.length === 0) {
    const where = afterParam === undefined ? '' : ` WHERE id ${compare} ${afterParam}`
    return {
      text: `SELECT ${columns} FROM users${where} ORDER BY id ${direction} LIMIT $1`,
      values,
      key: `${input.order}${afterParam === undefined ? '' : '_after'}`,
    }
  }
  const parts = statuses.map(
    (status) =>
      `(SELECT ${columns} FROM users WHERE status = ${param(status)}${afterSql} ORDER BY id ${direction} LIMIT $1)`,
  )
  const text =
    parts.length === 1
      ? (parts[0] ?? '').slice(1, -1)
      : `SELECT * FROM (${parts.join(' UNION ALL ')}) AS picked ORDER BY id ${direction} LIMIT $1`
  return {
    text,
    values,
    key: `${input.order}${afterParam === undefined ? '' : '_after'}_s${statuses.length}`,
  }
}

/** One page without `q`: `limit + 1` rows, the last proving that more follow. */
export function pageShape(input: ShapeInput, limit: number): SqlShape {
  const { text, values, key } = source(input, USER_COLUMNS)
  return { name: `users_page_${key}`, text, values: [limit + 1, ...values] }
}

/**
 * One page with `q`: the first `budget + 1` users of the walk (the last one only proves that the
 * walk goes on); of the first `budget`, those whose name or email key contains the needle, at most
 * `limit + 1`, with their position; and the users at positions `budget` and `budget + 1`. The keys
 * are compared with ς read as σ, as the needle is (toSearchText).
 */
export function searchShape(
  input: ShapeInput,
  limit: number,
  budget: number,
  needle: string,
): SqlShape {
  const { text, values, key } = source(input, 'id, email_key, name_key')
  const direction = input.order === 'asc' ? 'ASC' : 'DESC'
  const n = values.length + 2
  const sql = `WITH walk AS (
      SELECT id, (replace(email_key, 'ς', 'σ') LIKE $${n} OR replace(name_key, 'ς', 'σ') LIKE $${n}) AS hit, row_number() OVER (ORDER BY id ${direction}) AS position
      FROM (${text}) AS window_rows
    )
    SELECT * FROM (
      (SELECT w.position, true AS hit, ${userColumnsOf('u')}
        FROM walk w JOIN users u ON u.id = w.id
        WHERE w.hit AND w.position <= $${n + 1} ORDER BY w.position LIMIT $${n + 2})
      UNION ALL
      (SELECT w.position, false AS hit, w.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
        FROM walk w WHERE w.position >= $${n + 1})
    ) AS found ORDER BY position, hit DESC`
  return {
    name: `users_search_${key}`,
    text: sql,
    values: [budget + 1, ...values, likePattern(needle), budget, limit + 1],
  }
}

/** USER_COLUMNS of the table named `alias` in a join. */
export function userColumnsOf(alias: string): string {
  return (
    `${alias}.id, ${alias}.email, ${alias}.name, ${alias}.status, ${alias}.metadata::text AS metadata, ` +
    `${alias}.created_at, ${alias}.updated_at, ${alias}.version, ${alias}.tokens_valid_after`
  )
}

/** `%needle%` with LIKE's own characters taken literally (backslash is LIKE's default escape). */
export function likePattern(needle: string): string {
  return `%${needle.replace(/[\\%_]/g, (char) => `\\${char}`)}%`
}
