import type { UserRecord } from './user.js'

/**
 * The answer a request sent with an `Idempotency-Key` got, kept to be sent again, byte for byte,
 * to its retries (docs/api.md, safe retries): its status, body and the headers that describe it.
 */
export interface KeptAnswer {
  readonly status: number
  readonly body?: string
  readonly contentType?: string
  readonly etag?: string
  /** Today only `location`, the created user's address. */
  readonly headers?: Readonly<Record<string, string>>
}

/** A kept key: who sent it, what it was sent with, the answer it got and until when it is kept. */
export interface KeptKey {
  /** The `sub` of the token that sent it: the same key of two subjects is two keys. */
  readonly subject: string
  /** The key itself, 1 to 255 printable ASCII characters. */
  readonly key: string
  /** The request's fingerprint (method, path as sent and body bytes), as lower-case hex. */
  readonly fingerprint: string
  readonly answer: KeptAnswer
  /** Milliseconds since the epoch after which the key is unknown. */
  readonly expiresAt: number
}

/**
 * Handed down with a change whose request carries a key: the store calls `keep` with the record
 * its change made (undefined for a deletion) as the change commits, and makes the key it returns
 * durable in the same atomic step as the change (the same log record, the same transaction). A
 * change that makes no event (nothing changed) does not call it: its key is kept alone, after.
 */
export interface KeyToKeep {
  keep(record: UserRecord | undefined): KeptKey
}

/** Whether a kept key has expired at `now` (milliseconds since the epoch). */
export function isExpired(kept: KeptKey, now: number): boolean {
  return kept.expiresAt <= now
}

/**
 * The key of a request that runs, as its handler sees it: `keep` makes the kept key of the answer
 * the request is about to get (and notes that it was kept).
 */
export interface PendingKey {
  keep(answer: KeptAnswer): KeptKey
}
