import type { EventDraft } from '../../domain/event.js'
import { EMPTY_METADATA, metadataJson, parseMetadata } from '../../domain/metadata.js'
import { toRecord, type UserRecord, type UserStatus } from '../../domain/user.js'
import type { ListPage } from '../store.js'
import type { QueryResultRow } from './pg-types.js'

/** A user as the database gives it back (USER_COLUMNS). */
export interface UserRow extends QueryResultRow {
  id: string
  email: string
  name: string
  status: UserStatus
  metadata: string
  created_at: string
  updated_at: string
  /** bigint: the driver gives it as text; every value is at most MAX_VERSION, exact as a number. */
  version: string
  tokens_valid_after: string | null
}

/** A row of a `q` search: where it came in the walk, and whether it matched. */
export interface SearchRow extends UserRow {
  position: string
  hit: boolean
}

/** The columns a user is stored in, in the order of rowValues. */
export const STORED_COLUMNS =
  'id, email, email_key, name, name_key, status, metadata, created_at, updated_at, version, tokens_valid_after'

export function rowValues(record: UserRecord): unknown[] {
  const { user } = record
  return [
    user.id,
    user.email,
    record.emailKey,
    user.name,
    user.name.toLowerCase(),
    user.status,
    metadataJson(user.metadata),
    user.createdAt,
    user.updatedAt,
    user.version,
    user.tokensValidAfter ?? null,
  ]
}

/** rowValues of many records, column by column, for unnest. */
export function rowColumns(records: readonly UserRecord[]): unknown[][] {
  const rows = records.map(rowValues)
  return Array.from({ length: rows[0]?.length ?? 0 }, (_, column) => rows.map((row) => row[column]))
}

/**
 * The record of a row. Metadata keys come back as own data properties (`__proto__` included),
 * in the order stored: json keeps the text as written, and parseMetadata keeps that order.
 */
export function toUserRecord(row: UserRow): UserRecord {
  return toRecord({
    id: row.id,
    email: row.email,
    name: row.name,
    status: row.status,
    metadata: parseMetadata(row.metadata) ?? EMPTY_METADATA,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    version: Number(row.version),
    ...(row.tokens_valid_after === null ? {} : { tokensValidAfter: row.tokens_valid_after }),
  })
}

export function withMore(items: readonly UserRecord[], resumeAfter: string | undefined): ListPage {
  return resumeAfter === undefined
    ? { items, hasMore: true }
    : { items, hasMore: true, resumeAfter }
}

/** The draft as a list of none or one, for a transaction's events. */
export function one(draft: EventDraft | undefined): EventDraft[] {
  return draft === undefined ? [] : [draft]
}
