import type { KeptKey } from '../domain/kept-key.js'

/** What a hold on a key found: the caller holds it now, or another process's request does. */
export type KeyHold = 'held' | 'in_use'

/**
 * Where a store keeps the `Idempotency-Key`s of requests that succeeded (docs/api.md, safe
 * retries). A key that went with a change is written by the change itself (KeyToKeep); the rest
 * is here. Kept keys live in storage, not in the process: a store holds at most a bounded cache.
 */
export interface KeptKeys {
  /** The key of this subject while it is kept (not expired); undefined when it is unknown. */
  find(subject: string, key: string): Promise<KeptKey | undefined>
  /**
   * Holds the key for a request in flight against the other processes that share the store (the
   * replicas of one database): 'in_use' while another one holds it. A store only one process
   * opens answers 'held' at once: holds within a process are the caller's to keep.
   */
  hold(subject: string, key: string): Promise<KeyHold>
  /** Gives a hold back when its request ends without its key kept. */
  release(subject: string, key: string): Promise<void>
  /**
   * Durably keeps the key of a request that succeeded without a change (an unchanged repeat, an
   * empty patch), before it is answered; rejects with storage_unavailable when it cannot.
   */
  keepAlone(kept: KeptKey): Promise<void>
}

/** What an entry of a cache of kept keys costs besides its strings (the object, the map's entry). */
const ENTRY_BYTES = 256

/** About what a kept key takes in memory: its strings (two bytes a character) and the objects. */
export function weighKeptKey(kept: KeptKey): number {
  const { answer } = kept
  const chars =
    kept.subject.length +
    kept.key.length +
    kept.fingerprint.length +
    (answer.body?.length ?? 0) +
    (answer.contentType?.length ?? 0) +
    (answer.etag?.length ?? 0) +
    (answer.headers?.['location']?.length ?? 0)
  return 2 * chars + ENTRY_BYTES
}
