import type { ChangeContext } from '../../domain/change-context.js'
import { internalFault } from '../../domain/errors.js'
import { draftEvent } from '../../domain/event.js'
import { toRecord, type User, type UserRecord, type UserStatus } from '../../domain/user.js'
import { isCanonicalUuid } from '../../domain/uuid7.js'
import { type Logger, silentLogger } from '../../logger.js'
import { PerKeyQueue } from '../per-key-queue.js'
import type {
  ChangeUser,
  ListPage,
  ListQuery,
  Store,
  StoreCapabilities,
  StoreHealth,
  SubjectState,
} from '../store.js'
import { duplicateId, notCanonical, userNotFound } from '../store-errors.js'
import { checkStorableContext, checkStorableQuery, checkStorableUser } from '../store-input.js'
import { PgConnection } from './connection.js'
import { CreateBatcher } from './create-batch.js'
import type { PgModule } from './driver.js'
import { contention } from './errors.js'
import { PostgresEventFeed } from './events.js'
import { listUsers } from './list-users.js'
import { one, rowValues, STORED_COLUMNS, toUserRecord, type UserRow } from './rows.js'
import { migrate } from './schema.js'
import { USER_COLUMNS } from './sql.js'

export interface PostgresStoreOptions {
  /** postgres:// or postgresql:// */
  url: string
  logger?: Logger
  /** A schema of its own (created when missing) instead of the role's default search_path. */
  schema?: string
  /** Most connections of this process (default 10). */
  poolSize?: number
  /** Milliseconds since the epoch, for tombstones (Date.now by default). */
  now?: () => number
  /** How often the database is probed for /readyz (default 1000 ms). */
  probeIntervalMs?: number
  /** The driver; loaded with import('pg') when not given. */
  pg?: PgModule
  /** Events older than this many days are pruned (default 30). */
  eventsRetentionDays?: number
  /** How often a stream looks for events other replicas committed (default 200 ms). */
  eventPollMs?: number
}

/** A change lost to another replica is re-read and tried again, this many times at most. */
const MAX_ATTEMPTS = 100

const CAPABILITIES: StoreCapabilities = Object.freeze({
  dataDir: undefined,
  durable: true,
  shared: true,
  turnsReadOnly: false,
})

/**
 * Users in PostgreSQL, shared by any number of replicas. Nothing is cached: every read asks the
 * database, so what one replica writes every other one sees on its next request. Writes to one
 * user are queued in this process (so that it does not race itself) and checked against the
 * database by compare-and-set on `version`, so that replicas cannot overwrite each other; email
 * uniqueness is the unique index on the email key. It owns no directory: the data directory's
 * lock is the process's.
 */
export class PostgresStore implements Store {
  readonly capabilities = CAPABILITIES
  readonly #options: PostgresStoreOptions
  readonly #logger: Logger
  readonly #now: () => number
  readonly #queues = new PerKeyQueue()
  readonly #db: PgConnection
  readonly #creates: CreateBatcher
  #prune: NodeJS.Timeout | undefined
  /** The change feed (§10), read from the database. */
  readonly events: PostgresEventFeed

  constructor(options: PostgresStoreOptions) {
    this.#options = options
    this.#logger = options.logger ?? silentLogger
    this.#now = options.now ?? Date.now
    this.#db = new PgConnection({
      url: options.url,
      logger: this.#logger,
      schema: options.schema,
      poolSize: options.poolSize,
      pg: options.pg,
    })
    this.events = new PostgresEventFeed(
      (shape) => this.#db.query(shape),
      options.eventPollMs,
      () => this.#db.client(),
    )
    this.#creates = new CreateBatcher(
      this.#db,
      () => this.#time(),
      () => {
        this.events.committed()
      },
    )
  }

  /** Deletes the events past the retention; every replica may do it, the result is the same. */
  async pruneEvents(): Promise<void> {
    const retentionMs = (this.#options.eventsRetentionDays ?? 30) * 86_400_000
    await this.events.prune(new Date(this.#now() - retentionMs).toISOString())
  }

  /** Nothing to claim: the database is shared, and the data directory is the process's. */
  lock(): void {
    // Nothing to claim.
  }

  prepare(): Promise<void> {
    return this.connect()
  }

  /** Loads the driver (refusing the start when it is missing) and makes the pool; idempotent. */
  connect(): Promise<void> {
    return this.#db.connect()
  }

  async open(): Promise<void> {
    await this.connect()
    const client = await this.#db.client()
    try {
      await migrate(client, this.#logger, this.#options.schema)
    } finally {
      client.release()
    }
    this.#db.startProbe(this.#options.probeIntervalMs ?? 1000)
    this.#prune = setInterval(() => {
      this.pruneEvents().catch(() => undefined)
    }, 60_000)
    this.#prune.unref()
  }

  async close(): Promise<void> {
    clearInterval(this.#prune)
    this.events.stop()
    await this.#db.end()
  }

  health(): StoreHealth {
    return this.#db.health
  }

  /** Unknown without a query: /metrics leaves the gauge out. */
  count(): undefined {
    return undefined
  }

  async get(id: string): Promise<UserRecord | undefined> {
    // No other id is ever stored, and the database would refuse some (a NUL) as input.
    if (!isCanonicalUuid(id)) return undefined
    const result = await this.#db.query<UserRow>({
      name: 'users_get',
      text: `SELECT ${USER_COLUMNS} FROM users WHERE id = $1`,
      values: [id],
    })
    const row = result.rows[0]
    return row === undefined ? undefined : toUserRecord(row)
  }

  async getMany(ids: readonly string[]): Promise<UserRecord[]> {
    // One round trip for the whole batch, whatever its size (at most 100 ids from the API).
    const result = await this.#db.query<UserRow>({
      name: 'users_get_many',
      text: `SELECT ${USER_COLUMNS} FROM users WHERE id = ANY($1::text[])`,
      values: [ids.filter(isCanonicalUuid)],
    })
    return result.rows.map(toUserRecord)
  }

  async isDeleted(id: string): Promise<boolean> {
    if (!isCanonicalUuid(id)) return false
    const result = await this.#db.query({
      name: 'tombstones_has',
      text: 'SELECT 1 FROM tombstones WHERE id = $1',
      values: [id],
    })
    return result.rows.length > 0
  }

  async subjectOf(id: string): Promise<SubjectState> {
    // One round trip for what would be two (the row and its tombstone): this runs on every
    // request whose token's subject is a user id.
    if (!isCanonicalUuid(id)) return { status: undefined, deleted: false }
    const result = await this.#db.query<{ status: UserStatus | null; deleted: boolean }>({
      name: 'users_subject',
      text: 'SELECT (SELECT status FROM users WHERE id = $1) AS status, EXISTS (SELECT 1 FROM tombstones WHERE id = $1) AS deleted',
      values: [id],
    })
    const row = result.rows[0]
    return { status: row?.status ?? undefined, deleted: row?.deleted === true }
  }

  async list(query: ListQuery): Promise<ListPage> {
    checkStorableQuery(query)
    return listUsers(query, (statement) => this.#db.query(statement))
  }

  /** Group-committed with the creates around it (CreateBatcher); a row the batch skipped is tried alone. */
  create(user: User, check?: () => void, context?: ChangeContext): Promise<UserRecord> {
    if (!isCanonicalUuid(user.id)) return Promise.reject(notCanonical(user.id))
    try {
      checkStorableUser(user, undefined)
      checkStorableContext(context)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#queues.run(user.id, async () => {
      const record = toRecord(user)
      const inserted = await this.#creates.insert(record, check, context)
      return inserted ? record : this.#createAlone(record, check, context)
    })
  }

  async #createAlone(
    record: UserRecord,
    check: (() => void) | undefined,
    context: ChangeContext | undefined,
  ): Promise<UserRecord> {
    check?.()
    const inserted = await this.#db.transaction(
      (client) =>
        client.query({
          name: 'users_insert',
          text: `INSERT INTO users (${STORED_COLUMNS})
        SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10
        WHERE NOT EXISTS (SELECT 1 FROM tombstones WHERE id = $1)`,
          values: rowValues(record),
        }),
      (result) =>
        result.rowCount === 1
          ? one(draftEvent(undefined, record, record.user.id, this.#time(), context))
          : [],
      this.#committed,
    )
    if (inserted.rowCount !== 1) throw duplicateId(record.user.id)
    return record
  }

  update(id: string, change: ChangeUser, context?: ChangeContext): Promise<UserRecord> {
    return this.#queues.run(id, async () => {
      for (let attempt = 1; ; attempt += 1) {
        const current = await this.#require(id)
        const next = change(current)
        if (next === undefined) return current
        if (next.id !== id) throw internalFault(`a change may not alter the id of user ${id}`)
        checkStorableUser(next, current.user)
        checkStorableContext(context)
        const record = toRecord(next)
        const updated = await this.#db.transaction(
          (client) =>
            client.query({
              name: 'users_update',
              text: `UPDATE users SET email = $2, email_key = $3, name = $4, name_key = $5, status = $6, metadata = $7,
            created_at = $8, updated_at = $9, version = $10 WHERE id = $1 AND version = $11`,
              values: [...rowValues(record), current.user.version],
            }),
          (result) =>
            result.rowCount === 1
              ? one(draftEvent(current.user, record, id, this.#time(), context))
              : [],
          this.#committed,
        )
        if (updated.rowCount === 1) return record
        // Another replica changed or deleted the user since it was read: read it again.
        if (attempt >= MAX_ATTEMPTS) throw contention(id)
      }
    })
  }

  delete(
    id: string,
    check?: (current: UserRecord) => void,
    context?: ChangeContext,
  ): Promise<void> {
    return this.#queues.run(id, async () => {
      for (let attempt = 1; ; attempt += 1) {
        const current = await this.#require(id)
        check?.(current)
        checkStorableContext(context)
        const deletedAt = new Date(this.#now()).toISOString()
        const deleted = await this.#db.transaction(
          async (client) => {
            const removed = await client.query({
              name: 'users_delete',
              text: 'DELETE FROM users WHERE id = $1 AND version = $2',
              values: [id, current.user.version],
            })
            if (removed.rowCount !== 1) return false
            await client.query({
              name: 'tombstones_insert',
              text: 'INSERT INTO tombstones (id, deleted_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING',
              values: [id, deletedAt],
            })
            return true
          },
          (removed) =>
            removed
              ? one(
                  draftEvent(
                    current.user,
                    undefined,
                    id,
                    deletedAt,
                    context,
                    current.user.version + 1,
                  ),
                )
              : [],
          this.#committed,
        )
        if (deleted) return
        if (attempt >= MAX_ATTEMPTS) throw contention(id)
      }
    })
  }

  readonly #committed = (): void => {
    this.events.committed()
  }

  async #require(id: string): Promise<UserRecord> {
    const current = await this.get(id)
    if (current === undefined) throw userNotFound()
    return current
  }

  #time(): string {
    return new Date(this.#now()).toISOString()
  }
}
