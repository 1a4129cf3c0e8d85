import { ServiceError } from '../../domain/errors.js'
import { isCanonicalUuid } from '../../domain/uuid7.js'
import type { DeliveryAttempt, StoredWebhook } from '../../domain/webhook.js'
import { PerKeyQueue } from '../per-key-queue.js'
import {
  checkStorableCursor,
  checkStorableWebhook,
  duplicateWebhookId,
  webhookLimitReached,
  webhookNotFound,
} from '../webhook-input.js'
import { KEPT_ATTEMPTS, type WebhookStore } from '../webhook-store.js'
import type { PgConnection } from './connection.js'
import type { PoolClient } from './pg-types.js'
import {
  ATTEMPT_COLUMNS,
  type AttemptRow,
  attemptValues,
  toAttempt,
  toStoredWebhook,
  WEBHOOK_COLUMNS,
  WEBHOOK_READ_COLUMNS,
  type WebhookRow,
  webhookValues,
} from './webhook-schema.js'

/** One key for every replica's creates: the count and the insert are one step across replicas. */
const CREATE_LOCK = 7_355_608_118

/** A change lost to another replica is read again and tried again, this many times at most. */
const MAX_ATTEMPTS = 100

const FOREIGN_KEY_VIOLATION = '23503'

/**
 * Webhook endpoints in PostgreSQL (migration 8), shared by every replica: nothing is cached. An
 * update is compared and set on the row's `revision`, so that replicas cannot overwrite each
 * other; a create counts the endpoints under a transaction-scoped advisory lock, so that the
 * limit holds across replicas; a lease is a row whose holder only that holder renews until it
 * expires by the database's clock, which every replica shares.
 */
export class PostgresWebhooks implements WebhookStore {
  readonly #db: PgConnection
  readonly #queues = new PerKeyQueue()

  constructor(db: PgConnection) {
    this.#db = db
  }

  async list(): Promise<StoredWebhook[]> {
    const found = await this.#db.query<WebhookRow>({
      name: 'webhooks_list',
      text: `SELECT ${WEBHOOK_READ_COLUMNS} FROM webhooks ORDER BY created_at, id`,
      values: [],
    })
    return found.rows.map(toStoredWebhook)
  }

  async get(id: string): Promise<StoredWebhook | undefined> {
    const row = await this.#read(id)
    return row === undefined ? undefined : toStoredWebhook(row)
  }

  async create(hook: StoredWebhook, cursor: string, max: number): Promise<void> {
    const { id } = hook.endpoint
    checkStorableWebhook(hook, id)
    checkStorableCursor(cursor)
    await this.#db.transaction(
      async (client) => {
        await client.query('SELECT pg_advisory_xact_lock($1)', [CREATE_LOCK])
        const found = await client.query<{ count: number; taken: boolean }>({
          name: 'webhooks_count',
          text: 'SELECT count(*)::integer AS count, coalesce(bool_or(id = $1), false) AS taken FROM webhooks',
          values: [id],
        })
        const { count, taken } = found.rows[0] ?? { count: 0, taken: false }
        if (taken) throw duplicateWebhookId(id)
        if (count >= max) throw webhookLimitReached(max)
        await insertWebhook(client, hook, cursor)
      },
      () => [],
      () => undefined,
    )
  }

  update(
    id: string,
    change: (current: StoredWebhook) => StoredWebhook | undefined,
  ): Promise<StoredWebhook> {
    return this.#queues.run(id, async () => {
      for (let attempt = 1; ; attempt += 1) {
        const row = await this.#read(id)
        if (row === undefined) throw webhookNotFound()
        const current = toStoredWebhook(row)
        const next = change(current)
        if (next === undefined) return current
        checkStorableWebhook(next, id)
        const updated = await this.#db.query({
          name: 'webhooks_update',
          text: `UPDATE webhooks SET (${WEBHOOK_COLUMNS}) = ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13),
            revision = revision + 1 WHERE id = $1 AND revision = $14`,
          values: [...webhookValues(next), row.revision],
        })
        if (updated.rowCount === 1) return next
        // Another replica changed or deleted the endpoint since it was read: read it again.
        if (attempt >= MAX_ATTEMPTS) throw contention()
      }
    })
  }

  delete(id: string, check?: (current: StoredWebhook) => void): Promise<void> {
    return this.#queues.run(id, async () => {
      for (let attempt = 1; ; attempt += 1) {
        const row = await this.#read(id)
        if (row === undefined) throw webhookNotFound()
        check?.(toStoredWebhook(row))
        const removed = await this.#db.query({
          name: 'webhooks_delete',
          text: 'DELETE FROM webhooks WHERE id = $1 AND revision = $2',
          values: [id, row.revision],
        })
        if (removed.rowCount === 1) return
        // Another replica changed or deleted it since it was read: check again.
        if (attempt >= MAX_ATTEMPTS) throw contention()
      }
    })
  }

  async cursor(id: string): Promise<string | undefined> {
    if (!isCanonicalUuid(id)) return undefined
    const found = await this.#db.query<{ after: string }>({
      name: 'webhook_cursors_get',
      text: 'SELECT after FROM webhook_cursors WHERE webhook_id = $1',
      values: [id],
    })
    return found.rows[0]?.after
  }

  async setCursor(id: string, after: string): Promise<void> {
    checkStorableCursor(after)
    if (!isCanonicalUuid(id)) throw webhookNotFound()
    const set = await this.#db.query({
      name: 'webhook_cursors_set',
      text: 'UPDATE webhook_cursors SET after = $2 WHERE webhook_id = $1',
      values: [id, after],
    })
    if (set.rowCount !== 1) throw webhookNotFound()
  }

  async advanceCursor(id: string, from: string, to: string): Promise<boolean> {
    checkStorableCursor(to)
    if (!isCanonicalUuid(id)) return false
    const moved = await this.#db.query({
      name: 'webhook_cursors_advance',
      // FOR SHARE waits for a disabling being committed, then sees it: no move after its answer.
      text: `UPDATE webhook_cursors SET after = $3 WHERE webhook_id = $1 AND after = $2
        AND EXISTS (SELECT 1 FROM webhooks WHERE id = $1 AND enabled FOR SHARE)`,
      values: [id, from, to],
    })
    return moved.rowCount === 1
  }

  /** Inserts the attempt and drops the endpoint's oldest past KEPT_ATTEMPTS, in one statement. */
  async logAttempt(id: string, attempt: DeliveryAttempt): Promise<void> {
    if (!isCanonicalUuid(id)) return
    try {
      // The DELETE sees the table as it was before the INSERT: it keeps one fewer than kept.
      await this.#db.query({
        name: 'webhook_attempts_add',
        text: `WITH added AS (
            INSERT INTO webhook_attempts (webhook_id, ${ATTEMPT_COLUMNS})
            SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = $1)
            RETURNING 1
          )
          DELETE FROM webhook_attempts WHERE webhook_id = $1 AND id < (
            SELECT id FROM webhook_attempts WHERE webhook_id = $1 ORDER BY id DESC OFFSET $12 LIMIT 1
          )`,
        values: [id, ...attemptValues(attempt), KEPT_ATTEMPTS - 2],
      })
    } catch (error) {
      // The endpoint was deleted while its attempt was in flight: its log went with it.
      if (!isForeignKeyViolation(error)) throw error
    }
  }

  async attempts(id: string, limit: number, before?: string): Promise<DeliveryAttempt[]> {
    if (!isCanonicalUuid(id)) return []
    const bounded = before !== undefined
    const found = await this.#db.query<AttemptRow>({
      name: bounded ? 'webhook_attempts_before' : 'webhook_attempts_newest',
      text: `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE webhook_id = $1
        ${bounded ? 'AND id < $3' : ''} ORDER BY id DESC LIMIT $2`,
      values: bounded ? [id, limit, before] : [id, limit],
    })
    return found.rows.map(toAttempt)
  }

  async lease(id: string, holder: string, ms: number): Promise<boolean> {
    if (!isCanonicalUuid(id)) return false
    try {
      const taken = await this.#db.query({
        name: 'webhook_leases_take',
        text: `INSERT INTO webhook_leases (webhook_id, holder, expires_at)
            SELECT id, $2, now() + make_interval(secs => $3::double precision / 1000) FROM webhooks WHERE id = $1
          ON CONFLICT (webhook_id) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
            WHERE webhook_leases.holder = EXCLUDED.holder OR webhook_leases.expires_at <= now()`,
        values: [id, holder, ms],
      })
      return taken.rowCount === 1
    } catch (error) {
      if (isForeignKeyViolation(error)) return false
      throw error
    }
  }

  async releaseLease(id: string, holder: string): Promise<void> {
    if (!isCanonicalUuid(id)) return
    await this.#db.query({
      name: 'webhook_leases_release',
      text: 'DELETE FROM webhook_leases WHERE webhook_id = $1 AND holder = $2',
      values: [id, holder],
    })
  }

  async #read(id: string): Promise<WebhookRow | undefined> {
    if (!isCanonicalUuid(id)) return undefined
    const found = await this.#db.query<WebhookRow>({
      name: 'webhooks_get',
      text: `SELECT ${WEBHOOK_READ_COLUMNS} FROM webhooks WHERE id = $1`,
      values: [id],
    })
    return found.rows[0]
  }
}

async function insertWebhook(client: PoolClient, hook: StoredWebhook, cursor: string) {
  await client.query({
    name: 'webhooks_insert',
    text: `INSERT INTO webhooks (${WEBHOOK_COLUMNS})
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
    values: webhookValues(hook),
  })
  await client.query({
    name: 'webhook_cursors_insert',
    text: 'INSERT INTO webhook_cursors (webhook_id, after) VALUES ($1, $2)',
    values: [hook.endpoint.id, cursor],
  })
}

/** A foreign key violation, as the driver threw it or as the connection classified it. */
function isForeignKeyViolation(error: unknown): boolean {
  const cause = error instanceof ServiceError ? error.cause : error
  return (cause as { code?: unknown } | null)?.code === FOREIGN_KEY_VIOLATION
}

function contention(): ServiceError {
  return new ServiceError(
    'storage_unavailable',
    'This webhook endpoint changed too often at once to apply this change; try again.',
    { retryAfterSeconds: 1 },
  )
}
