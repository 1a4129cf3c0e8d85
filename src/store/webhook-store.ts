import type { DeliveryAttempt, StoredWebhook } from '../domain/webhook.js'

/** The attempts of an endpoint's delivery log that are kept: its newest ones. */
export const KEPT_ATTEMPTS = 1000

/**
 * Where a store keeps webhook endpoints, their cursors, their delivery logs and who delivers to
 * each (docs/webhooks.md). Endpoint writes are durable before they resolve; secrets are kept like
 * user files (files of mode 0600, or a table). Every method rejects with ServiceErrors only.
 */
export interface WebhookStore {
  /** Every endpoint, oldest first. */
  list(): Promise<StoredWebhook[]>
  get(id: string): Promise<StoredWebhook | undefined>
  /**
   * Stores a new endpoint whose cursor starts at `cursor` (an event id): webhook_limit_reached
   * when `max` endpoints are stored already (across replicas too).
   */
  create(hook: StoredWebhook, cursor: string, max: number): Promise<void>
  /**
   * Changes an endpoint: `change` runs on the stored one with no other change of it in between
   * (on any replica) and returns the next one, or undefined to keep it; it may throw to refuse.
   * not_found when there is no such endpoint.
   */
  update(
    id: string,
    change: (current: StoredWebhook) => StoredWebhook | undefined,
  ): Promise<StoredWebhook>
  /**
   * Removes an endpoint with its cursor and its log; not_found when there is none. `check` runs on
   * the stored endpoint with no other change of it in between (on any replica) and may throw to
   * refuse the delete (a failed If-Match).
   */
  delete(id: string, check?: (current: StoredWebhook) => void): Promise<void>
  /** The id of the last event the endpoint is done with; undefined when there is no endpoint. */
  cursor(id: string): Promise<string | undefined>
  /** A client moves the cursor (to replay or to skip). */
  setCursor(id: string, after: string): Promise<void>
  /**
   * Delivery moves the cursor from `from` to `to` after a 2xx, unless it was moved meanwhile (a
   * client's setCursor) or the endpoint is disabled (by anyone, on any replica): false then, in
   * one step with that check. It may be saved lazily, never ahead of an acknowledgment.
   */
  advanceCursor(id: string, from: string, to: string): Promise<boolean>
  /** Adds an attempt to the endpoint's log, which keeps its newest KEPT_ATTEMPTS. */
  logAttempt(id: string, attempt: DeliveryAttempt): Promise<void>
  /** The endpoint's attempts, newest first, those before the attempt id `before` when given. */
  attempts(id: string, limit: number, before?: string): Promise<DeliveryAttempt[]>
  /**
   * Takes or renews the lease of delivering to an endpoint for `holder` (a process) for `ms`:
   * false while another holder's lease runs. A store only one process opens may always say true.
   */
  lease(id: string, holder: string, ms: number): Promise<boolean>
  /** Gives a lease back (a stopping process, a deleted endpoint). */
  releaseLease(id: string, holder: string): Promise<void>
}
