import type { ChangeEvent } from '../domain/event.js'
import type { KeptKey } from '../domain/kept-key.js'
import type { Tombstone } from '../domain/tombstone.js'
import type { UserRecord } from '../domain/user.js'
import type { EventJournal } from './feed/journal.js'
import type { KeptKeys } from './kept-keys.js'
import type { StoreCapabilities, StoreHealth } from './store.js'
import type { UserIndex } from './user-index.js'
import type { WebhookStore } from './webhook-store.js'

/**
 * Appends the change's event to the log, once, and resolves when it is durable; a durable step
 * calls it when everything that can be refused before the change is committed is done.
 */
export type LogEvent = () => Promise<void>

/** How a store makes a change's event durable, or voids one whose change was not made. */
export interface EventDurability {
  /**
   * Makes the event durable before its change is written, with the `Idempotency-Key` of the
   * request that made the change when it has one (in the same record: both or neither); a failure
   * is a WriteError. Once it resolves, the key is found by `keys`.
   */
  logEvent(event: ChangeEvent, kept?: KeptKey): Promise<void>
  /** Durably marks an event whose change was not written as void. */
  voidEvent(event: ChangeEvent): Promise<void>
  /** The change is committed (its event durable) but its step failed after: told, not undone. */
  unwritten(event: ChangeEvent, error: unknown): void
}

/**
 * What an indexed store holds in memory, handed to its durability once when the store is built:
 * the durability fills it at open (from what the disk holds) and turns the store read-only when
 * the disk can no longer be trusted.
 */
export interface IndexedState {
  readonly index: UserIndex
  /** Deleted ids and when they were deleted: their tokens stay refused forever. */
  readonly tombstones: Map<string, string>
  readonly events: EventJournal
  health(): StoreHealth
  /**
   * From now on every write is refused until a restart reloads what the disk holds: after a
   * failed fsync the kernel may have dropped changes it had reported as written, so nothing
   * this process believes about the disk can be trusted ("fsyncgate").
   */
  turnReadOnly(reason: string): void
}

/**
 * How an indexed store (store/indexed-store.ts) keeps what it holds: none for the memory store,
 * the write-ahead log and the user files for the file store. The store is an index plus one of
 * these, given when it is built.
 */
export interface Durability extends EventDurability {
  readonly capabilities: StoreCapabilities
  /** The kept `Idempotency-Key`s: those logged with changes, and those kept alone. */
  readonly keys: KeptKeys
  /** The webhook endpoints, kept as this durability keeps users (Store.webhooks). */
  readonly webhooks: WebhookStore
  /** Called once, as the store is built, with what the store holds in memory. */
  attach(state: IndexedState): void
  /** Claims what it owns exclusively (a data directory's lock), synchronously; idempotent. */
  lock(): void
  /** Loads what it keeps into the state attached; claims first. */
  open(): Promise<void>
  close(): Promise<void>
  /**
   * Makes the record durable; a failure is a WriteError. What the disk may refuse comes first (a
   * temp file written), then `log()` (its event made durable: the change is committed), and only
   * then may anything show on disk. When `log()` rejects, that rejection is the failure; a step
   * that does not call it leaves it to be called after. `log` is undefined for a change without
   * an event (nothing changed but the version), which no log holds: it must be durable by itself.
   * `later`: a user created by an import, whose file may be written after the answer, in a batch
   * (the file store's checkpoint), since its durable event already lets a restart write it.
   */
  persist(record: UserRecord, log: LogEvent | undefined, later?: boolean): Promise<void>
  /**
   * Durably replaces the user by its tombstone, in the same order as `persist`: what may be
   * refused, then `log()` (the deletion's event made durable), then the directory changes.
   */
  bury(tombstone: Tombstone, log: LogEvent): Promise<void>
}
