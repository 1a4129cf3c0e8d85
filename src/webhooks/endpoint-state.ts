/**
 * The delivery state of an endpoint that outlives a loop: where its retry schedule stands (read
 * back from its delivery log after a restart), and its disabling by delivery.
 */
import type { ChangeEvent } from '../domain/event.js'
import type {
  DeliveryAttempt,
  DisabledReason,
  StoredWebhook,
  WebhookEndpoint,
} from '../domain/webhook.js'
import type { WebhookStore } from '../store/webhook-store.js'
import type { AttemptOutcome } from './attempt.js'
import { webhookId } from './webhook-message.js'

/**
 * Where the event now tried stands: its attempts to the endpoint so far (the log's numbering),
 * those that failed since its schedule last started fresh (the schedule's position: an enabling or
 * a client's move of the cursor starts a fresh one), and when the next may start, on the
 * monotonic clock (performance.now()): a wall clock set back an hour after a failure would
 * otherwise hold the retry, and every later event of the endpoint, for that hour more.
 */
export interface RetryState {
  readonly eventId: string
  readonly attempts: number
  readonly failed: number
  readonly dueAt: number
}

/** The last attempt a loop logged while it held the lease. */
export interface LoggedAttempt {
  readonly eventId: string
  readonly attempt: number
}

/**
 * A new event, or a fresh schedule: its attempts so far are those the loop logged (`last`), or,
 * when it did not log the last one (a start, a lease taken over), as the log says.
 */
export function freshRetry(
  webhooks: WebhookStore,
  hook: StoredWebhook,
  eventId: string,
  schedule: readonly number[],
  last: LoggedAttempt | undefined,
  nowMs: number,
): Promise<RetryState> | RetryState {
  if (last === undefined) return resumedRetry(webhooks, hook, eventId, schedule, nowMs)
  return { eventId, attempts: last.eventId === eventId ? last.attempt : 0, failed: 0, dueAt: 0 }
}

/**
 * The state of `eventId` as the endpoint's log tells it, after a restart or a lease taken over:
 * the next attempt is due the schedule's delay after the last failed one (without its jitter, not
 * kept). The store keeps no time of the last enabling, so failures count from the endpoint's last
 * change of any kind: a schedule read back this way is never further on than the one it resumes.
 * The wait left is measured on the wall clock (`nowMs`, ms since the epoch) and is never longer
 * than the delay itself, whatever the clock did since the attempt.
 */
export async function resumedRetry(
  webhooks: WebhookStore,
  hook: StoredWebhook,
  eventId: string,
  schedule: readonly number[],
  nowMs: number,
): Promise<RetryState> {
  const entries = await webhooks.attempts(hook.endpoint.id, schedule.length + 1)
  const newest = entries[0]
  if (newest === undefined || newest.eventId !== eventId) {
    return { eventId, attempts: 0, failed: 0, dueAt: 0 }
  }
  const since = Date.parse(hook.endpoint.updatedAt)
  let failed = 0
  for (const entry of entries) {
    const counts =
      entry.eventId === eventId && entry.result === 'failed' && Date.parse(entry.time) >= since
    if (!counts) break
    failed += 1
  }
  const delay = failed === 0 ? 0 : (schedule[failed - 1] ?? 0)
  const wallDueAt = Date.parse(newest.time) + newest.durationMs + delay
  const left = Math.min(Math.max(wallDueAt - nowMs, 0), delay)
  return {
    eventId,
    attempts: newest.attempt,
    failed,
    dueAt: failed === 0 ? 0 : performance.now() + left,
  }
}

/**
 * Whether the endpoint was enabled between two reads of it, which starts a fresh retry schedule:
 * seen disabled then enabled, or enabled with a version moved by more than one (a disabling and
 * an enabling may both have fallen between the reads). Any other change (URL, types,
 * description, secrets) keeps the schedule where it stands.
 */
export function enabledBetween(before: WebhookEndpoint, next: WebhookEndpoint): boolean {
  return next.enabled && (!before.enabled || next.version - before.version > 1)
}

/**
 * Disables an enabled endpoint for `reason` (version +1, disabledAt): the endpoint as stored
 * then, or undefined when it was disabled already (by a client, or by another process).
 */
export async function disableEndpoint(
  webhooks: WebhookStore,
  id: string,
  reason: DisabledReason,
  nowMs: number,
): Promise<StoredWebhook | undefined> {
  const at = new Date(nowMs).toISOString()
  let changed = false
  const hook = await webhooks.update(id, (current) => {
    changed = current.endpoint.enabled
    if (!changed) return undefined
    return {
      ...current,
      endpoint: {
        ...current.endpoint,
        enabled: false,
        disabledReason: reason,
        disabledAt: at,
        updatedAt: at,
        version: current.endpoint.version + 1,
      },
    }
  })
  return changed ? hook : undefined
}

/** The delivery log entry of an attempt. */
export function attemptEntry(
  id: string,
  event: ChangeEvent,
  attempt: number,
  time: string,
  outcome: AttemptOutcome,
): DeliveryAttempt {
  return {
    id,
    webhookId: webhookId(event.id),
    eventId: event.id,
    eventType: event.type,
    attempt,
    time,
    durationMs: outcome.durationMs,
    result: outcome.result,
    responseStatus: outcome.responseStatus,
    error: outcome.error,
    response: outcome.response,
  }
}
