import type { UserRecord, UserStatus } from '../../domain/user.js'
import { isCanonicalUuid } from '../../domain/uuid7.js'
import type { SubjectRead, SubjectState } from '../store.js'
import type { PgConnection } from './connection.js'
import type { QueryResultRow } from './pg-types.js'
import { toUserRecord, type UserRow } from './rows.js'
import { USER_COLUMNS, userColumnsOf } from './sql.js'

// Each statement is named, so prepared once per connection, and its text is built once here,
// not per request.
const GET_TEXT = `SELECT ${USER_COLUMNS} FROM users WHERE id = $1`
const GET_MANY_TEXT = `SELECT ${USER_COLUMNS} FROM users WHERE id = ANY($1::text[])`
const SUBJECT_TEXT =
  'SELECT u.status, u.tokens_valid_after, EXISTS (SELECT 1 FROM tombstones WHERE id = $1) AS deleted FROM (SELECT 1) AS one LEFT JOIN users AS u ON u.id = $1'
// The user ($1) and the subject ($2) from one snapshot; the left joins give a row of NULLs for
// either when there is no such user.
const GET_AS_TEXT =
  `SELECT ${userColumnsOf('u')}, s.status AS subject_status, s.tokens_valid_after AS subject_tokens_valid_after, ` +
  'EXISTS (SELECT 1 FROM tombstones WHERE id = $2) AS subject_deleted ' +
  'FROM (SELECT 1) AS one LEFT JOIN users AS u ON u.id = $1 LEFT JOIN users AS s ON s.id = $2'

const NO_SUBJECT: SubjectState = Object.freeze({
  status: undefined,
  deleted: false,
  tokensValidAfter: undefined,
})

/** The reads of PostgresStore: each one asks the database, nothing is cached. */
export function getUser(db: PgConnection, id: string): Promise<UserRecord | undefined> {
  // No other id is ever stored, and the database would refuse some (a NUL) as input.
  if (!isCanonicalUuid(id)) return Promise.resolve(undefined)
  return db
    .query<UserRow>({ name: 'users_get', text: GET_TEXT, values: [id] })
    .then(({ rows: [row] }) => (row === undefined ? undefined : toUserRecord(row)))
}

export async function getUsers(db: PgConnection, ids: readonly string[]): Promise<UserRecord[]> {
  // One round trip for the whole batch, whatever its size (at most 100 ids from the API).
  const result = await db.query<UserRow>({
    name: 'users_get_many',
    text: GET_MANY_TEXT,
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

/** What subjectOf's statement gives: the subject's row, if any, and whether its id is buried. */
interface SubjectRow extends QueryResultRow {
  status: UserStatus | null
  deleted: boolean
  tokens_valid_after: string | null
}

function toSubjectState(row: SubjectRow | undefined): SubjectState {
  return {
    status: row?.status ?? undefined,
    deleted: row?.deleted === true,
    tokensValidAfter: row?.tokens_valid_after ?? undefined,
  }
}

export function subjectOf(db: PgConnection, id: string): Promise<SubjectState> {
  // One round trip for what would be two (the row and its tombstone): this runs on every
  // request whose token's subject is a user id.
  if (!isCanonicalUuid(id)) return Promise.resolve(NO_SUBJECT)
  return db
    .query<SubjectRow>({ name: 'users_subject', text: SUBJECT_TEXT, values: [id] })
    .then(({ rows: [row] }) => toSubjectState(row))
}

/** The user's row with its subject's state (subjectOf's columns, prefixed `subject_`). */
interface UserAsRow extends UserRow {
  subject_status: UserStatus | null
  subject_deleted: boolean
  subject_tokens_valid_after: string | null
}

/**
 * getUser and subjectOf in one statement, so one round trip, both read in one snapshot: a read
 * of one user by a token whose subject is a user.
 */
export async function getUserAs(
  db: PgConnection,
  id: string,
  subject: string,
): Promise<SubjectRead> {
  // Neither id can be stored unless canonical (and the database refuses some others as input):
  // for such an id, the other's own read is the only statement.
  if (!isCanonicalUuid(id) || !isCanonicalUuid(subject))
    return { record: await getUser(db, id), subject: await subjectOf(db, subject) }
  const {
    rows: [row],
  } = await db.query<UserAsRow>({ name: 'users_get_as', text: GET_AS_TEXT, values: [id, subject] })
  if (row === undefined) return { record: undefined, subject: NO_SUBJECT }
  return {
    record: row.id === null ? undefined : toUserRecord(row),
    subject: toSubjectState({
      status: row.subject_status,
      deleted: row.subject_deleted,
      tokens_valid_after: row.subject_tokens_valid_after,
    }),
  }
}
