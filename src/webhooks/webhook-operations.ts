import { ServiceError } from '../domain/errors.js'
import { checkUntagged, type Preconditions, requirePreconditions } from '../domain/preconditions.js'
import { createIdGenerator, type IdGenerator, isCanonicalUuid } from '../domain/uuid7.js'
import type { DeliveryAttempt, StoredWebhook, WebhookEndpoint } from '../domain/webhook.js'
import type { EventFeed } from '../store/event-feed.js'
import type { WebhookStore } from '../store/webhook-store.js'
import type { RefusedHost } from './check-webhook-url.js'
import type { DeliveryControl } from './delivery-control.js'
import {
  validateCursorBody,
  validateRotation,
  validateWebhookCreate,
  validateWebhookPatch,
  type WebhookInput,
} from './validate-webhook.js'
import { webhookEtag } from './webhook-json.js'

export interface WebhookOperationsOptions {
  readonly webhooks: WebhookStore
  /** The change feed: a new endpoint's cursor starts at its head; a moved cursor must be in it. */
  readonly feed: Pick<EventFeed, 'read'> & { head(): Promise<string> }
  /** Milliseconds since the epoch. */
  readonly now: () => number
  readonly newId?: IdGenerator | undefined
  /** A new `whsec_` secret (webhooks/signature.ts). */
  readonly newSecret: () => string
  /** Whether a url's host may not be registered (WEBHOOK_ALLOW_NETWORKS). */
  readonly refusedHost: RefusedHost
  /** The most endpoints (WEBHOOKS_MAX). */
  readonly max: number
  /** Told of every change, so that delivery follows it. */
  readonly delivery: DeliveryControl
  /** Runs just before a change is written and throws to refuse it (maintenance). */
  readonly writeGate?: (() => void) | undefined
}

/** A page of an endpoint's delivery log, newest first. */
export interface AttemptPage {
  readonly items: readonly DeliveryAttempt[]
  readonly hasMore: boolean
}

/**
 * What can be done to webhook endpoints, independent of HTTP (docs/webhooks.md): their rules,
 * preconditions, secrets and cursors. Each change is told to delivery.
 */
export interface WebhookOperations {
  /** Every endpoint, oldest first. */
  list(): Promise<WebhookEndpoint[]>
  get(id: string): Promise<WebhookEndpoint>
  /** The new endpoint with its secret (shown once), its cursor at the feed's head. */
  create(body: unknown): Promise<StoredWebhook>
  patch(id: string, body: unknown, conditions: Preconditions): Promise<WebhookEndpoint>
  remove(id: string, conditions: Preconditions): Promise<void>
  /** A new secret; the previous one signs beside it for the overlap asked (shown once). */
  rotateSecret(id: string, body: unknown, conditions: Preconditions): Promise<StoredWebhook>
  cursor(id: string): Promise<string>
  /** Moves the cursor to the body's `after`; returns it. */
  /** The cursor has no ETag: only `*` matches (404 first, then 412, then the body's 422). */
  setCursor(id: string, body: unknown, conditions: Preconditions): Promise<string>
  /** The endpoint's attempts, newest first, those before the attempt `before` when given. */
  attempts(id: string, limit: number, before: string | undefined): Promise<AttemptPage>
}

export function createWebhookOperations(options: WebhookOperationsOptions): WebhookOperations {
  const { webhooks, feed, now, newSecret, refusedHost, max, delivery } = options
  const newId = options.newId ?? createIdGenerator()
  const writeGate = options.writeGate ?? ((): void => undefined)

  const find = async (id: string): Promise<StoredWebhook> => {
    requireWebhookId(id)
    const found = await webhooks.get(id)
    if (found === undefined) throw notFound()
    return found
  }

  /** Never before the previous change, even if the clock steps back. */
  const nextTime = (current: WebhookEndpoint): string =>
    new Date(Math.max(now(), Date.parse(current.updatedAt))).toISOString()

  const applyInput = (
    current: WebhookEndpoint,
    input: WebhookInput,
  ): WebhookEndpoint | undefined => {
    if (sameInput(current, input)) return undefined
    const at = nextTime(current)
    const enabling = input.enabled && !current.enabled
    const disabling = !input.enabled && current.enabled
    return {
      ...current,
      ...input,
      ...(enabling ? { disabledReason: null, disabledAt: null } : {}),
      ...(disabling ? { disabledReason: 'manual', disabledAt: at } : {}),
      updatedAt: at,
      version: current.version + 1,
    }
  }

  /**
   * An endpoint whose cursor fell behind the retained feed cannot resume: 410 cursor_expired
   * until a client moves its cursor (the feed's read says so).
   */
  const requireLiveCursor = async (id: string): Promise<void> => {
    const cursor = await webhooks.cursor(id)
    if (cursor === undefined) throw notFound()
    await feed.read({ after: cursor, limit: 1 })
  }

  return {
    list: () => webhooks.list().then((stored) => stored.map((hook) => hook.endpoint)),

    get: (id) => find(id).then((hook) => hook.endpoint),

    async create(body) {
      const input = validateWebhookCreate(body, refusedHost)
      const { id, ms } = newId(now())
      const at = new Date(ms).toISOString()
      const endpoint: WebhookEndpoint = {
        id,
        ...input,
        disabledReason: input.enabled ? null : 'manual',
        disabledAt: input.enabled ? null : at,
        previousSecretExpiresAt: null,
        createdAt: at,
        updatedAt: at,
        version: 1,
      }
      const hook: StoredWebhook = { endpoint, secret: newSecret(), previousSecret: null }
      const cursor = await feed.head()
      writeGate()
      await webhooks.create(hook, cursor, max)
      delivery.changed(id)
      return hook
    },

    async patch(id, body, conditions) {
      // 404, 412 and 422 before the cursor's 410, as the fault order has them.
      const before = await find(id)
      checkPreconditions(before.endpoint, conditions)
      const input = validateWebhookPatch(body, before.endpoint, refusedHost)
      if (input.enabled && !before.endpoint.enabled) await requireLiveCursor(id)
      let changed = false
      const stored = await webhooks.update(id, (current) => {
        checkPreconditions(current.endpoint, conditions)
        const next = applyInput(
          current.endpoint,
          validateWebhookPatch(body, current.endpoint, refusedHost),
        )
        if (next === undefined) return undefined
        writeGate()
        changed = true
        return { ...current, endpoint: next }
      })
      if (changed) delivery.changed(id)
      return stored.endpoint
    },

    async remove(id, conditions) {
      requireWebhookId(id)
      await webhooks.delete(id, (current) => {
        checkPreconditions(current.endpoint, conditions)
        writeGate()
      })
      delivery.removed(id)
    },

    async rotateSecret(id, body, conditions) {
      requireWebhookId(id)
      const stored = await webhooks.update(id, (current) => {
        checkPreconditions(current.endpoint, conditions)
        const overlapSeconds = validateRotation(body)
        writeGate()
        const at = nextTime(current.endpoint)
        const overlapping = overlapSeconds > 0
        return {
          endpoint: {
            ...current.endpoint,
            previousSecretExpiresAt: overlapping
              ? new Date(Date.parse(at) + overlapSeconds * 1000).toISOString()
              : null,
            updatedAt: at,
            version: current.endpoint.version + 1,
          },
          secret: newSecret(),
          // The one being replaced: a rotation during an overlap drops the older one at once.
          previousSecret: overlapping ? current.secret : null,
        }
      })
      delivery.changed(id)
      return stored
    },

    async cursor(id) {
      requireWebhookId(id)
      const cursor = await webhooks.cursor(id)
      if (cursor === undefined) throw notFound()
      return cursor
    },

    async setCursor(id, body, conditions) {
      await find(id)
      checkUntagged(conditions, false)
      const after = validateCursorBody(body)
      // A cursor the feed no longer holds is 410 cursor_expired.
      await feed.read({ after, limit: 1 })
      writeGate()
      await webhooks.setCursor(id, after)
      delivery.changed(id, true)
      return after
    },

    async attempts(id, limit, before) {
      await find(id)
      const items = await webhooks.attempts(id, limit + 1, before)
      return { items: items.slice(0, limit), hasMore: items.length > limit }
    },
  }
}

/** Ids are canonical UUIDs; anything else names no endpoint and never reaches the store. */
function requireWebhookId(id: string): void {
  if (!isCanonicalUuid(id)) throw notFound()
}

function notFound(): ServiceError {
  return new ServiceError('not_found', 'There is no webhook endpoint with this id.')
}

/** A write goes ahead only when If-Match matches and If-None-Match does not. */
function checkPreconditions(current: WebhookEndpoint, conditions: Preconditions): void {
  requirePreconditions(conditions, webhookEtag(current), false)
}

function sameInput(current: WebhookEndpoint, input: WebhookInput): boolean {
  return (
    current.url === input.url &&
    current.description === input.description &&
    current.enabled === input.enabled &&
    String(current.eventTypes) === String(input.eventTypes) &&
    (current.eventTypes === null) === (input.eventTypes === null)
  )
}
