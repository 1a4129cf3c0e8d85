import type { UserRecord, UserStatus } from '../../domain/user.js'
import { isCanonicalUuid } from '../../domain/uuid7.js'
import type { SubjectState } from '../store.js'
import type { PgConnection } from './connection.js'
import { toUserRecord, type UserRow } from './rows.js'
import { USER_COLUMNS } from './sql.js'

/** The reads of PostgresStore: each one asks the database, nothing is cached. */
export async function getUser(db: PgConnection, id: string): Promise<UserRecord | undefined> {
  // No other id is ever stored, and the database would refuse some (a NUL) as input.
  if (!isCanonicalUuid(id)) return undefined
  const result = await db.query<UserRow>({
    name: 'users_get',
    text: `SELECT ${USER_COLUMNS} FROM users WHERE id = $1`,
    values: [id],
  })
  const row = result.rows[0]
  return row === undefined ? undefined : toUserRecord(row)
}

export async function getUsers(db: PgConnection, ids: readonly string[]): Promise<UserRecord[]> {
  // One round trip for the whole batch, whatever its size (at most 100 ids from the API).
  const result = await db.query<UserRow>({
    name: 'users_get_many',
    text: `SELECT ${USER_COLUMNS} FROM users WHERE id = ANY($1::text[])`,
    values: [ids.filter(isCanonicalUuid)],
  })
  return result.rows.map(toUserRecord)
}

export async function isDeleted(db: PgConnection, id: string): Promise<boolean> {
  if (!isCanonicalUuid(id)) return false
  const result = await db.query({
    name: 'tombstones_has',
    text: 'SELECT 1 FROM tombstones WHERE id = $1',
    values: [id],
  })
  return result.rows.length > 0
}

export async function subjectOf(db: PgConnection, id: string): Promise<SubjectState> {
  // One round trip for what would be two (the row and its tombstone): this runs on every
  // request whose token's subject is a user id.
  if (!isCanonicalUuid(id))
    return { status: undefined, deleted: false, tokensValidAfter: undefined }
  const result = await db.query<{
    status: UserStatus | null
    deleted: boolean
    tokens_valid_after: string | null
  }>({
    name: 'users_subject',
    text: 'SELECT u.status, u.tokens_valid_after, EXISTS (SELECT 1 FROM tombstones WHERE id = $1) AS deleted FROM (SELECT 1) AS one LEFT JOIN users AS u ON u.id = $1',
    values: [id],
  })
  const row = result.rows[0]
  return {
    status: row?.status ?? undefined,
    deleted: row?.deleted === true,
    tokensValidAfter: row?.tokens_valid_after ?? undefined,
  }
}
