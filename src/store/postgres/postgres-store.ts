import type { ChangeContext } from '../../domain/change-context.js'
import { internalFault } from '../../domain/errors.js'
import { draftEvent, idFloor } from '../../domain/event.js'
import { toRecord, type User, type UserRecord } from '../../domain/user.js'
import { isCanonicalUuid } from '../../domain/uuid7.js'
import { type Logger, silentLogger } from '../../log/logger.js'
import { PerKeyQueue } from '../per-key-queue.js'
import type {
  ChangeUser,
  ListPage,
  ListQuery,
  Store,
  StoreCapabilities,
  StoreHealth,
  SubjectRead,
  SubjectState,
} from '../store.js'
import { duplicateId, notCanonical, userNotFound } from '../store-errors.js'
import { checkStorableContext, checkStorableQuery, checkStorableUser } from '../store-input.js'
import { retentionCutoff, upkeepClock } from '../upkeep-clock.js'
import { raiseIdFloor } from './append-events.js'
import { PgConnection } from './connection.js'
import { CreateBatcher } from './create-batch.js'
import { PostgresEventFeed } from './events.js'
import { keepWithChange } from './kept-key-writes.js'
import { PostgresKeys } from './kept-keys.js'
import { one } from './rows.js'
import { migrate } from './schema.js'
import { requireSchemaColumns } from './schema-check.js'
import { type PostgresStoreOptions, SESSION_DEFAULTS } from './store-options.js'
import { listUsers } from './user-list-query.js'
import { getUser, getUserAs, getUsers, isDeleted, subjectOf } from './user-reads.js'
import { buryAtVersion, insertUnlessBuried, untilWon, updateAtVersion } from './user-writes.js'
import { PostgresWebhooks } from './webhooks.js'

export type { PostgresStoreOptions } from './store-options.js'

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
 * uniqueness is the unique index on the email key. A change's Idempotency-Key is a row written in
 * the change's transaction (kept-keys.ts). It owns no directory: the data directory's lock is the
 * process's.
 */
export class PostgresStore implements Store {
  readonly capabilities = CAPABILITIES
  readonly #options: PostgresStoreOptions
  readonly #logger: Logger
  readonly #now: () => number
  /** What pruning deletes by: a wall clock stepped forward a moment prunes nothing (upkeepClock). */
  readonly #upkeepNow: () => number
  readonly #queues = new PerKeyQueue()
  readonly #db: PgConnection
  readonly #creates: CreateBatcher
  #prune: NodeJS.Timeout | undefined
  /** The change feed (docs/events.md), read from the database. */
  readonly events: PostgresEventFeed
  /** The kept Idempotency-Keys; a change's key is written by the change's transaction. */
  readonly keys: PostgresKeys
  /** The webhook endpoints, their cursors, logs and leases, shared by every replica. */
  readonly webhooks: PostgresWebhooks

  constructor(options: PostgresStoreOptions) {
    this.#options = options
    this.#logger = options.logger ?? silentLogger
    this.#now = options.now ?? Date.now
    this.#upkeepNow = upkeepClock(options.now)
    this.#db = new PgConnection({
      url: options.url,
      logger: this.#logger,
      schema: options.schema,
      poolSize: options.poolSize,
      pg: options.pg,
      statementTimeoutMs: options.databaseStatementTimeoutMs ?? SESSION_DEFAULTS.statementTimeoutMs,
      idleInTransactionTimeoutMs:
        options.databaseIdleInTransactionTimeoutMs ?? SESSION_DEFAULTS.idleInTransactionTimeoutMs,
      stallWarnMs: options.feedStallWarnMs ?? SESSION_DEFAULTS.stallWarnMs,
      seenHead: () => this.events.seenHead,
    })
    this.events = new PostgresEventFeed((shape) => this.#db.query(shape), {
      pollMs: options.eventPollMs,
      listen: () => this.#db.client(),
      stalls: this.#db.stalls,
    })
    this.keys = new PostgresKeys(this.#db, options.keyTimings)
    this.webhooks = new PostgresWebhooks(this.#db)
    this.#creates = new CreateBatcher(this.#db, this.#now, () => {
      this.events.committed()
    })
  }

  /** Deletes the events past the retention; every replica may do it, the result is the same. */
  async pruneEvents(): Promise<void> {
    await this.events.prune(retentionCutoff(this.#upkeepNow(), this.#options.eventsRetentionDays))
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
    // Without the driver's time-out: a migration may rewrite a table, or wait for another's.
    const client = await this.#db.migrationClient()
    try {
      await migrate(client, this.#logger, this.#options.schema)
      await requireSchemaColumns(client)
      await raiseIdFloor(client, idFloor(this.#now()))
    } finally {
      client.release()
    }
    this.#db.startProbe(this.#options.probeIntervalMs ?? 1000)
    this.#prune = setInterval(() => {
      this.pruneEvents().catch(() => undefined)
    }, 60_000)
    this.#prune.unref()
    this.keys.start()
  }

  async close(): Promise<void> {
    clearInterval(this.#prune)
    this.keys.stop()
    this.events.stop()
    await this.#db.end()
  }

  health(): StoreHealth {
    return this.#db.health
  }

  /** The database's pruning changes no file of DATA_DIR: a backup of it is the database's own. */
  pauseUpkeep(_paused: () => boolean): void {}

  /** Unknown without a query: /metrics leaves the gauge out. */
  count(): undefined {
    return undefined
  }

  get(id: string): Promise<UserRecord | undefined> {
    return getUser(this.#db, id)
  }

  getMany(ids: readonly string[]): Promise<UserRecord[]> {
    return getUsers(this.#db, ids)
  }

  isDeleted(id: string): Promise<boolean> {
    return isDeleted(this.#db, id)
  }

  subjectOf(id: string): Promise<SubjectState> {
    return subjectOf(this.#db, id)
  }

  getAs(id: string, subject: string): Promise<SubjectRead> {
    return getUserAs(this.#db, id, subject)
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
    return this.#queues.run(user.id, () =>
      this.keys.withChange(context, async (tracked) => {
        const record = toRecord(user)
        const inserted = await this.#creates.insert(record, check, tracked)
        return inserted ? record : this.#createAlone(record, check, tracked)
      }),
    )
  }

  async #createAlone(
    record: UserRecord,
    check: (() => void) | undefined,
    context: ChangeContext | undefined,
  ): Promise<UserRecord> {
    check?.()
    const inserted = await this.#db.transaction(
      async (client) => {
        const result = await insertUnlessBuried(client, record)
        if (result.rowCount === 1) await keepWithChange(client, context, record)
        return result
      },
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
    return this.#queues.run(id, () =>
      this.keys.withChange(context, (tracked) =>
        untilWon(id, async () => {
          const current = await this.#require(id)
          const next = change(current)
          if (next === undefined) return { won: current }
          if (next.id !== id) throw internalFault(`a change may not alter the id of user ${id}`)
          checkStorableUser(next, current.user)
          checkStorableContext(tracked)
          const record = toRecord(next)
          const draft = draftEvent(current.user, record, id, this.#time(), tracked)
          const updated = await this.#db.transaction(
            async (client) => {
              const result = await updateAtVersion(client, record, current.user.version)
              // A change that makes no event keeps its key alone, after (KeptKeys.keepAlone).
              if (result.rowCount === 1 && draft !== undefined)
                await keepWithChange(client, tracked, record)
              return result
            },
            (result) => (result.rowCount === 1 ? one(draft) : []),
            this.#committed,
          )
          return updated.rowCount === 1 ? { won: record } : undefined
        }),
      ),
    )
  }

  delete(
    id: string,
    check?: (current: UserRecord) => void,
    context?: ChangeContext,
  ): Promise<void> {
    return this.#queues.run(id, () =>
      this.keys.withChange(context, (tracked) =>
        untilWon(id, async () => {
          const current = await this.#require(id)
          check?.(current)
          checkStorableContext(tracked)
          const deletedAt = new Date(this.#now()).toISOString()
          const { version } = current.user
          const draft = draftEvent(current.user, undefined, id, deletedAt, tracked, version + 1)
          const deleted = await this.#db.transaction(
            async (client) => {
              const buried = await buryAtVersion(client, id, version, deletedAt)
              if (buried) await keepWithChange(client, tracked, undefined)
              return buried
            },
            (removed) => (removed ? one(draft) : []),
            this.#committed,
          )
          return deleted ? { won: undefined } : undefined
        }),
      ),
    )
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
