import { ServiceError } from '../domain/errors.js'
import type { ChangeEvent, EventType } from '../domain/event.js'
import type { EventQuery } from '../store/event-feed.js'

/** Who reads the stream: it ends when their token expires or their subject loses access (docs/events.md). */
export interface StreamReader {
  /** The token's `sub`. */
  readonly sub: string
  /** When the token stops being honoured: its `exp` plus the leeway, in ms since the epoch. */
  readonly expiresAtMs: number
  /** Rejects with token_revoked, subject_suspended or subject_deleted once the token may no longer read; undefined for a sub that names no user. */
  checkSubject(): Promise<void> | undefined
}

/**
 * The events of the reader's own subject after which it may no longer read: a creation too, as an
 * import may create the subject already suspended or with its tokens revoked.
 */
const LOSS_OF_ACCESS: readonly EventType[] = [
  'user.created',
  'user.suspended',
  'user.deleted',
  'user.tokens_revoked',
]

/**
 * Why the reader's subject may no longer read (the stream's last comment), or undefined; other
 * faults (a store down) keep the stream.
 */
export async function readLostAccess(
  reader: StreamReader | undefined,
): Promise<string | undefined> {
  try {
    await reader?.checkSubject()
    return undefined
  } catch (error) {
    if (!(error instanceof ServiceError)) return undefined
    if (error.code === 'token_revoked')
      return 'stream ended: the token was revoked; reconnect with a newer token and Last-Event-ID'
    if (error.code === 'subject_suspended')
      return 'stream ended: the subject of the token is suspended'
    if (error.code === 'subject_deleted')
      return 'stream ended: the subject of the token was deleted'
    return undefined
  }
}

/** A creation, suspension, deletion or revocation of the reader's own subject: access may have ended with it. */
export function isLossOfAccess(event: ChangeEvent, reader: StreamReader | undefined): boolean {
  return reader !== undefined && event.userId === reader.sub && LOSS_OF_ACCESS.includes(event.type)
}

/**
 * Whether the stream's filters may leave out an event of the reader's own loss of access (a
 * `type` list without all four, or another user's `userId`): then nothing in the feed tells the
 * stream, and it must ask.
 */
export function mayHideLossOfAccess(query: EventQuery, reader: StreamReader): boolean {
  if (query.userId !== undefined && query.userId !== reader.sub) return true
  const { types } = query
  return types !== undefined && !LOSS_OF_ACCESS.every((type) => types.includes(type))
}
