import type { KeyToKeep } from './kept-key.js'

/**
 * Who made a change and through which request (the event's actor and requestId), passed with
 * every write down to the store, which puts it in the change's event. Both are optional for
 * writes outside HTTP.
 */
export interface ChangeContext {
  /** The token's `sub`. */
  readonly actor?: string | undefined
  readonly requestId?: string | undefined
  /** The request's `Idempotency-Key`, kept with the change when it makes one. */
  readonly idempotency?: KeyToKeep | undefined
  /**
   * One line of an import: a store may leave a created user's file to a later batch (the file
   * store's checkpoint writes it from the log, which already makes the change durable).
   */
  readonly bulk?: boolean | undefined
}
