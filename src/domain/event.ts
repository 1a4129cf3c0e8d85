import type { ChangeContext } from './change-context.js'
import { isObject, valueText } from './json-text.js'
import { hasIndexKey, sameMetadata } from './metadata.js'
import { MAX_VERSION, type User, type UserRecord } from './user.js'

export type { ChangeContext } from './change-context.js'

export const EVENT_TYPES = [
  'user.created',
  'user.updated',
  'user.activated',
  'user.suspended',
  'user.deleted',
  'user.tokens_revoked',
] as const
export type EventType = (typeof EVENT_TYPES)[number]

/** One entry of the change feed (docs/events.md). `user` is absent on `user.deleted`: it carries no personal data. */
export interface ChangeEvent {
  /** 16 lower-case hex digits, strictly increasing in commit order, never reused. */
  readonly id: string
  readonly type: EventType
  readonly time: string
  readonly userId: string
  readonly version: number
  readonly actor?: string
  readonly requestId?: string
  readonly changed?: readonly string[]
  /** The user as GET shows it, as JSON text (kept serialised: it is sent far more than parsed). */
  readonly userJson?: string
}

/** What a change is, before it has an id: the store fills in the id when it commits it. */
export type EventDraft = Omit<ChangeEvent, 'id'>

export const EVENT_ID = /^[0-9a-f]{16}$/

export function formatEventId(n: number | bigint): string {
  return n.toString(16).padStart(16, '0')
}

/**
 * A cursor (or an event id) exactly, as a BigInt: 16 hex digits hold up to 2^64 - 1, and a JS
 * number rounds past 2^53, which moved cursors back by one.
 */
export function cursorValue(cursor: string): bigint {
  if (!EVENT_ID.test(cursor)) throw new RangeError(`not an event cursor: ${JSON.stringify(cursor)}`)
  return BigInt(`0x${cursor}`)
}

/** Orders two cursors or ids exactly: fixed-width lower-case hex sorts as the numbers it writes. */
export function compareCursors(a: string, b: string): number {
  if (!EVENT_ID.test(a) || !EVENT_ID.test(b))
    throw new RangeError(`not event cursors: ${JSON.stringify([a, b])}`)
  return a < b ? -1 : a > b ? 1 : 0
}

const SAFE = BigInt(Number.MAX_SAFE_INTEGER)
/** An id of at most 13 significant hex digits (below 2^52): a JS number holds it exactly. */
const SMALL_ID = /^000[0-9a-f]{13}$/

/**
 * The cursor as a bound for ids kept as JS numbers (always safe integers): the cursor itself when
 * it is one, else MAX_SAFE_INTEGER, so that for every such id, `id <= cursorFloor(c)` exactly when
 * the id is at or before the cursor.
 */
export function cursorFloor(cursor: string): number {
  const value = cursorValue(cursor)
  return value > SAFE ? Number.MAX_SAFE_INTEGER : Number(value)
}

/** An id this process handed out (or wrote to its log), as a number; a RangeError past 2^53 - 1. */
export function eventIdNumber(id: string): number {
  // Most ids start with 000 (below 2^52): parsed as a number exactly, without a BigInt, since a
  // change's id is read four times on its way through the file store.
  if (SMALL_ID.test(id)) return Number.parseInt(id, 16)
  const value = cursorValue(id)
  if (value > SAFE) throw new RangeError(`event id ${id} is past the ids this store hands out`)
  return Number(value)
}

/** Ids a store may hand out per millisecond, on average, before its ids run ahead of the clock. */
const IDS_PER_MS = 256
/** Below 2^52, where eventIdNumber reads an id without a BigInt: a clock past this is ignored. */
const MAX_FLOOR = 2 ** 52

/**
 * The lowest id a store that opens at `nowMs` (ms since the epoch) hands out: its clock's
 * milliseconds times IDS_PER_MS. The ids a store numbers after a backup older than its feed was
 * restored then start above every id it handed out before the backup was put back (unless it
 * appended more than IDS_PER_MS events a millisecond on average since it last opened), so that no
 * id is reused and every consumer's saved cursor stays below the new events. 0 for a clock that
 * cannot be right (before 1970, or past the year 2500).
 */
export function idFloor(nowMs: number): number {
  const floor = Math.floor(nowMs) * IDS_PER_MS
  return Number.isSafeInteger(floor) && floor > 0 && floor < MAX_FLOOR ? floor : 0
}

const COMPARED = ['email', 'name', 'metadata'] as const

/** The event a change makes (changeOf says which), or undefined when nothing changed. */
export function draftEvent(
  before: User | undefined,
  after: UserRecord | undefined,
  userId: string,
  time: string,
  context: ChangeContext | undefined,
  deletedVersion?: number,
): EventDraft | undefined {
  if (after === undefined) {
    // A user stored at MAX_VERSION by an earlier release can still be deleted: its deletion
    // keeps that version rather than name one no JSON client holds exactly.
    const version = Math.min(deletedVersion ?? (before?.version ?? 0) + 1, MAX_VERSION)
    return withContext({ type: 'user.deleted', time, userId, version }, context)
  }
  const user = after.user
  const change = before === undefined ? CREATED : changeOf(before, user)
  if (change === undefined) return undefined
  const draft: Mutable<EventDraft> = { type: change.type, time, userId, version: user.version }
  if (change.changed !== undefined) draft.changed = change.changed
  draft.userJson = after.json
  return withContext(draft, context)
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }
type Change = Pick<EventDraft, 'type' | 'changed'>

const CREATED: Change = { type: 'user.created' }

/** The draft with the change's actor and request id, where it has them. */
function withContext(draft: Mutable<EventDraft>, context: ChangeContext | undefined): EventDraft {
  if (context?.actor !== undefined) draft.actor = context.actor
  if (context?.requestId !== undefined) draft.requestId = context.requestId
  return draft
}

/**
 * What a change of an existing user is, or undefined when nothing changed: a status change is
 * activated or suspended; other field changes are an update naming them.
 */
function changeOf(before: User, user: User): Change | undefined {
  // A revocation changes nothing else: it is its own event.
  if (before.tokensValidAfter !== user.tokensValidAfter) return { type: 'user.tokens_revoked' }
  const statusChanged = before.status !== user.status
  if (statusChanged && user.status === 'active') return { type: 'user.activated' }
  if (statusChanged && user.status === 'suspended') return { type: 'user.suspended' }
  const changed: string[] = COMPARED.filter((field) =>
    field === 'metadata'
      ? !sameMetadata(before.metadata, user.metadata)
      : before[field] !== user[field],
  )
  if (statusChanged) changed.push('status')
  return changed.length === 0 ? undefined : { type: 'user.updated', changed }
}

/** The event as the feed shows it (docs/events.md), as JSON text. */
export function eventJson(event: ChangeEvent): string {
  // Built field by field: the optional fields are often absent, and a rest copy of the event
  // cost more than the string.
  let head = `{"id":"${event.id}","type":"${event.type}","time":${JSON.stringify(event.time)},"userId":${JSON.stringify(event.userId)},"version":${event.version}`
  if (event.actor !== undefined) head += `,"actor":${JSON.stringify(event.actor)}`
  if (event.requestId !== undefined) head += `,"requestId":${JSON.stringify(event.requestId)}`
  if (event.changed !== undefined) head += `,"changed":${JSON.stringify(event.changed)}`
  return event.userJson === undefined ? `${head}}` : `${head},"user":${event.userJson}}`
}

/** What an event is, without its user: what the file log's index and its load need. */
export type EventHead = Pick<ChangeEvent, 'id' | 'type' | 'time' | 'userId' | 'version'>

/** The JSON text as an object with an event's fields, or undefined when it is not one. */
function eventObject(text: string): (EventHead & Record<string, unknown>) | undefined {
  let v: unknown
  try {
    v = JSON.parse(text)
  } catch {
    return undefined
  }
  if (
    !isObject(v) ||
    typeof v.id !== 'string' ||
    !EVENT_ID.test(v.id) ||
    typeof v.type !== 'string' ||
    !(EVENT_TYPES as readonly string[]).includes(v.type) ||
    typeof v.time !== 'string' ||
    typeof v.userId !== 'string' ||
    typeof v.version !== 'number'
  )
    return undefined
  // As eventJson writes one: a deletion carries no user, every other event its user as an object.
  if (v.type === 'user.deleted' ? v.user !== undefined : !isObject(v.user)) return undefined
  return v as EventHead & Record<string, unknown>
}

/** The head of an event's JSON text (its user is not serialised again); undefined when it is not one. */
export function parseEventHead(text: string): EventHead | undefined {
  const v = eventObject(text)
  return v === undefined
    ? undefined
    : { id: v.id, type: v.type, time: v.time, userId: v.userId, version: v.version }
}

/** Reads an event back from its JSON text (the file log, a database row); undefined when it is not one. */
export function parseEvent(text: string): ChangeEvent | undefined {
  const v = eventObject(text)
  if (v === undefined) return undefined
  return {
    id: v.id,
    type: v.type,
    time: v.time,
    userId: v.userId,
    version: v.version,
    ...(typeof v.actor === 'string' ? { actor: v.actor } : {}),
    ...(typeof v.requestId === 'string' ? { requestId: v.requestId } : {}),
    ...(Array.isArray(v.changed)
      ? { changed: v.changed.filter((x): x is string => typeof x === 'string') }
      : {}),
    ...(v.user === undefined ? {} : { userJson: userText(text, v.user) }),
  }
}

/** The user of an event's text as JSON. */
function userText(text: string, user: unknown): string {
  const metadata =
    typeof user === 'object' && user !== null ? Reflect.get(user, 'metadata') : undefined
  // JSON.stringify would move index-like metadata keys ahead: the text as written keeps their order.
  if (typeof metadata === 'object' && metadata !== null && hasIndexKey(metadata))
    return valueText(text, ['user']) ?? JSON.stringify(user)
  return JSON.stringify(user)
}
