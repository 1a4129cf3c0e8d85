/**
 * A world for the delivery engine's tests: a store (memory by default), delivery over it with
 * short timings, a logger that keeps its lines, and endpoints registered the way the endpoint
 * operations register them (cursor at the feed's head).
 */
import type { TestContext } from 'node:test'

import { createIdGenerator } from '../../src/domain/uuid7.js'
import type { StoredWebhook, WebhookEndpoint } from '../../src/domain/webhook.js'
import type { Logger } from '../../src/log/logger.js'
import type { EventFeed } from '../../src/store/event-feed.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import type { Store } from '../../src/store/store.js'
import {
  createWebhookDelivery,
  type WebhookDelivery,
  type WebhookDeliveryOptions,
} from '../../src/webhooks/delivery.js'
import { newSecret } from '../../src/webhooks/signature.js'
import { makeUser } from './store-users.js'

export interface LogLine {
  readonly level: 'debug' | 'info' | 'warn' | 'error'
  readonly msg: string
  readonly fields: Record<string, unknown>
}

export interface DeliveryWorld {
  readonly store: Store
  readonly delivery: WebhookDelivery
  readonly lines: LogLine[]
  /** Stores an endpoint (cursor at the feed's head) and tells delivery. */
  register(url: string, fields?: Partial<WebhookEndpoint>): Promise<StoredWebhook>
  /** Changes an endpoint as a client would (version +1) and tells delivery. */
  patch(id: string, fields: Partial<WebhookEndpoint>): Promise<StoredWebhook>
  /** Creates a user: one user.created event. Returns the event's id. */
  write(): Promise<string>
}

const nextId = createIdGenerator()

export type WorldOptions = Partial<Omit<WebhookDeliveryOptions, 'store' | 'logger'>> & {
  readonly store?: Store
  /** The feed delivery reads instead of the store's (a wrapper that watches its reads). */
  readonly feed?: (events: EventFeed) => EventFeed
}

export async function startDeliveryWorld(
  t: TestContext,
  options: WorldOptions = {},
): Promise<DeliveryWorld> {
  const { feed, ...rest } = options
  const store = options.store ?? new MemoryStore()
  await store.open()
  const lines: LogLine[] = []
  const keep =
    (level: LogLine['level']) =>
    (msg: string, fields: Record<string, unknown> = {}): void => {
      lines.push({ level, msg, fields })
    }
  const logger: Logger = {
    debug: keep('debug'),
    info: keep('info'),
    warn: keep('warn'),
    error: keep('error'),
  }
  const delivery = createWebhookDelivery({
    logger,
    now: Date.now,
    paused: () => false,
    webhookTimeoutMs: 2000,
    webhookRetrySchedule: [100, 100],
    webhookAllowNetworks: ['127.0.0.0/8'],
    random: () => 0,
    timings: { leaseMs: 2000, renewMs: 500, pollMs: 50, refreshMs: 200 },
    ...rest,
    store: feed === undefined ? store : { webhooks: store.webhooks, events: feed(store.events) },
  })
  t.after(async () => {
    await delivery.close()
    await store.close()
  })
  delivery.start()
  const tell = (hook: StoredWebhook): StoredWebhook => {
    delivery.changed(hook.endpoint.id)
    return hook
  }
  return {
    store,
    delivery,
    lines,
    async register(url, fields = {}) {
      const { id, ms } = nextId(Date.now())
      const at = new Date(ms).toISOString()
      const hook: StoredWebhook = {
        endpoint: {
          id,
          url,
          eventTypes: null,
          description: '',
          enabled: true,
          disabledReason: null,
          disabledAt: null,
          previousSecretExpiresAt: null,
          createdAt: at,
          updatedAt: at,
          version: 1,
          ...fields,
        },
        secret: newSecret(),
        previousSecret: null,
      }
      await store.webhooks.create(hook, await store.events.head(), 20)
      return tell(hook)
    },
    async patch(id, fields) {
      const hook = await store.webhooks.update(id, (current) => ({
        ...current,
        endpoint: {
          ...current.endpoint,
          ...fields,
          updatedAt: new Date().toISOString(),
          version: current.endpoint.version + 1,
        },
      }))
      return tell(hook)
    },
    async write() {
      const before = await store.events.head()
      await store.create(makeUser())
      const page = await store.events.read({ after: before, limit: 1 })
      const event = page.items[0]
      if (event === undefined) throw new Error('the write appended no event')
      return event.id
    },
  }
}
