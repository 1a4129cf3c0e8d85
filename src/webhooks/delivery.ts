/**
 * Webhook delivery (docs/webhooks.md): one loop per endpoint (endpoint-loop.ts), so that a slow or
 * failing endpoint never delays another, woken by the change feed, told of endpoint changes by the
 * endpoint operations (DeliveryControl), and of those made by other processes by a listing now and
 * then (each attempt reads its endpoint first, so the listing only wakes a loop sooner). A write's
 * answer never waits for any of it.
 */
import { randomUUID } from 'node:crypto'

import { createIdGenerator } from '../domain/uuid7.js'
import type { StoredWebhook } from '../domain/webhook.js'
import type { Logger } from '../log/logger.js'
import type { WebhookCounts } from '../metrics/webhook-metrics.js'
import type { Settings } from '../settings-by-owner.js'
import type { Store } from '../store/store.js'
import { createAllowList } from './address-policy.js'
import type { DeliveryControl } from './delivery-control.js'
import { EndpointLoop } from './endpoint-loop.js'
import type { LoopContext } from './loop-context.js'

/** A lease runs this long unless renewed: a dead holder is replaced within about 15 s. */
export const LEASE_MS = 10_000
const RENEW_MS = 3_000
/** Without the lease, while paused, or after a store fault, a loop looks again after this. */
const POLL_MS = 1_000
/** How often the endpoints are listed, for endpoints other processes make, enable or delete. */
const REFRESH_MS = 5_000

export interface WebhookDeliveryOptions
  extends Pick<Settings, 'webhookTimeoutMs' | 'webhookRetrySchedule' | 'webhookAllowNetworks'> {
  readonly store: Pick<Store, 'webhooks' | 'events'>
  readonly logger: Logger
  /** Milliseconds since the epoch. */
  readonly now: () => number
  /** True while deliveries must wait: maintenance, or a store that cannot write. */
  readonly paused: () => boolean
  /** This process as lease holder; default a random id. */
  readonly holder?: string | undefined
  /** [0, 1), for the retry jitter; default Math.random. */
  readonly random?: (() => number) | undefined
  /** Tests shorten these: the lease, its renewal, the polls and the listing. */
  readonly timings?:
    | Partial<{ leaseMs: number; renewMs: number; pollMs: number; refreshMs: number }>
    | undefined
}

export interface WebhookDelivery extends DeliveryControl {
  /** Lists the endpoints and starts delivering; idempotent. */
  start(): void
  /** Stops every loop: attempts in flight are abandoned, not logged. */
  close(): Promise<void>
  /** For /metrics: attempts made by this process, endpoints by state. */
  counts(): WebhookCounts
}

export function createWebhookDelivery(options: WebhookDeliveryOptions): WebhookDelivery {
  const { store, logger } = options
  const timings = options.timings ?? {}
  const refreshMs = timings.refreshMs ?? REFRESH_MS
  const nextId = createIdGenerator()
  const attempts = { succeeded: 0, failed: 0 }
  const context: LoopContext = {
    store,
    logger,
    now: options.now,
    newId: () => nextId(options.now()).id,
    random: options.random ?? Math.random,
    timeoutMs: options.webhookTimeoutMs,
    retrySchedule: options.webhookRetrySchedule,
    allow: createAllowList(options.webhookAllowNetworks),
    paused: options.paused,
    holder: options.holder ?? randomUUID(),
    leaseMs: timings.leaseMs ?? LEASE_MS,
    renewMs: timings.renewMs ?? RENEW_MS,
    pollMs: timings.pollMs ?? POLL_MS,
    counted: (result) => {
      attempts[result] += 1
    },
  }
  const loops = new Map<string, EndpointLoop>()
  // Deleted here, with the number of listings begun by then: a listing begun before the deletion
  // must not bring them back. Once none of those is still under way (listings may overlap when
  // the store is slow), none can, and the id is forgotten: a process that deletes endpoints for
  // months does not keep every id.
  const removed = new Map<string, number>()
  let listings = 0
  const listing = new Set<number>()
  // Each loop's number of listings begun when it was added: a listing begun before cannot know
  // the endpoint (created here meanwhile), and does not remove it.
  const born = new Map<string, number>()
  let started = false
  let closed = false
  let unsubscribe: (() => void) | undefined
  let refresher: NodeJS.Timeout | undefined

  const add = (id: string, hook?: StoredWebhook): EndpointLoop => {
    const loop = new EndpointLoop(id, context, hook)
    loops.set(id, loop)
    born.set(id, listings)
    loop.start()
    return loop
  }
  const remove = (id: string): void => {
    removed.set(id, listings)
    const loop = loops.get(id)
    loops.delete(id)
    born.delete(id)
    void loop?.stop()
  }

  const refresh = async (): Promise<void> => {
    listings += 1
    const begun = listings
    listing.add(begun)
    let hooks: StoredWebhook[]
    try {
      hooks = await store.webhooks.list()
    } catch (error) {
      logger.warn('could not list the webhook endpoints', { error: String(error) })
      return
    } finally {
      listing.delete(begun)
    }
    if (closed) return
    const listed = new Set<string>()
    for (const hook of hooks) {
      const { id } = hook.endpoint
      if (removed.has(id)) continue
      listed.add(id)
      const loop = loops.get(id)
      if (loop === undefined) add(id, hook)
      else loop.listed(hook)
    }
    for (const id of [...loops.keys()])
      if (!listed.has(id) && (born.get(id) ?? 0) < begun) remove(id)
    const oldest = Math.min(...listing)
    for (const [id, by] of removed) if (by < oldest) removed.delete(id)
  }

  return {
    start() {
      if (started || closed) return
      started = true
      unsubscribe = store.events.subscribe(() => {
        for (const loop of loops.values()) loop.newEvents()
      })
      void refresh()
      refresher = setInterval(() => void refresh(), refreshMs)
      refresher.unref()
    },
    changed(id, cursorMoved) {
      if (!started || closed || removed.has(id)) return
      const loop = loops.get(id)
      if (loop === undefined) add(id)
      else loop.changed(cursorMoved)
    },
    removed(id) {
      remove(id)
    },
    async close() {
      closed = true
      clearInterval(refresher)
      unsubscribe?.()
      const stopping = [...loops.values()].map((loop) => loop.stop())
      loops.clear()
      await Promise.all(stopping)
    },
    counts() {
      let enabled = 0
      let disabled = 0
      for (const loop of loops.values()) {
        if (loop.hook === undefined) continue
        if (loop.hook.endpoint.enabled) enabled += 1
        else disabled += 1
      }
      return {
        attemptsSucceeded: attempts.succeeded,
        attemptsFailed: attempts.failed,
        endpointsEnabled: enabled,
        endpointsDisabled: disabled,
      }
    },
  }
}
