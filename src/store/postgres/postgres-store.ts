import type { Pool, PoolClient, PoolConfig, QueryResultRow } from 'pg'

import { HttpError } from '../../errors.js'
import { draftEvent, type ChangeContext, type EventDraft } from '../../domain/event.js'
import { silentLogger, type Logger } from '../../logger.js'
import { toRecord, type User, type UserRecord, type UserStatus } from '../../domain/user.js'
import { isCanonicalUuid } from '../../domain/uuid7.js'
import { makeDurableDirectory } from '../file/atomic-write.js'
import { DataDirLock } from '../file/data-dir-lock.js'
import { PerKeyQueue } from '../per-key-queue.js'
import { loadPg, type PgModule } from './driver.js'
import { classifyPgError, toInputError } from './errors.js'
import { appendEvents, PostgresEventFeed } from './events.js'
import { migrate, quoteIdentifier } from './schema.js'
import { pageShape, searchShape, USER_COLUMNS, type SqlShape } from './sql.js'
import type { ChangeUser, ListPage, ListQuery, Store, StoreHealth, SubjectState } from '../store.js'
import { checkStorableContext, checkStorableQuery, checkStorableUser } from '../store-input.js'

export interface PostgresStoreOptions {
  /** postgres:// or postgresql:// */
  url: string
  logger?: Logger
  /** A schema of its own (created when missing) instead of the role's default search_path. */
  schema?: string
  /** Most connections of this process (default 10). */
  poolSize?: number
  /**
   * A directory this process locks while it runs (the service's DATA_DIR: it still holds the
   * first-start secret and the maintenance file), or undefined for none.
   */
  dataDir?: string
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

interface UserRow extends QueryResultRow {
  id: string
  email: string
  name: string
  status: UserStatus
  metadata: string
  created_at: string
  updated_at: string
  /** bigint: the driver gives it as text; every value is at most MAX_VERSION, exact as a number. */
  version: string
}

interface SearchRow extends UserRow {
  position: string
  hit: boolean
}

const HEALTHY: StoreHealth = Object.freeze({ state: 'ok' })
/** A change lost to another replica is re-read and tried again, this many times at most. */
const MAX_ATTEMPTS = 100
const UNIQUE_VIOLATION = '23505'
/** The columns a user is stored in, in the order of rowValues. */
const STORED_COLUMNS = 'id, email, email_key, name, name_key, status, metadata, created_at, updated_at, version'

/** The most creates one transaction takes (a group commit). */
const MAX_BATCH = 500

/** A create waiting for the next batch; resolves with whether its row went in. */
interface PendingCreate {
  readonly record: UserRecord
  readonly check: (() => void) | undefined
  readonly context: ChangeContext | undefined
  readonly resolve: (inserted: boolean) => void
  readonly reject: (error: unknown) => void
}

/**
 * Users in PostgreSQL, shared by any number of replicas. Nothing is cached: every read asks the
 * database, so what one replica writes every other one sees on its next request. Writes to one
 * user are queued in this process (so that it does not race itself) and checked against the
 * database by compare-and-set on `version`, so that replicas cannot overwrite each other; email
 * uniqueness is the unique index on the email key. Every write goes through `#transaction`.
 */
export class PostgresStore implements Store {
  readonly #options: PostgresStoreOptions
  readonly #logger: Logger
  readonly #now: () => number
  readonly #queues = new PerKeyQueue()
  readonly #lock: DataDirLock | undefined
  readonly #dataDir: string | undefined
  #pool: Pool | undefined
  #probe: NodeJS.Timeout | undefined
  #health: StoreHealth = HEALTHY
  #prune: NodeJS.Timeout | undefined
  #creates: PendingCreate[] = []
  #creating = false
  /** The change feed (§10), read from the database. */
  readonly events: PostgresEventFeed

  constructor(options: PostgresStoreOptions) {
    this.#options = options
    this.#logger = options.logger ?? silentLogger
    this.#now = options.now ?? Date.now
    this.#dataDir = options.dataDir
    this.#lock = options.dataDir === undefined ? undefined : new DataDirLock(options.dataDir)
    this.events = new PostgresEventFeed((shape) => this.#query(shape), options.eventPollMs, () => this.#connection().connect())
  }

  /** Deletes the events past the retention; every replica may do it, the result is the same. */
  async pruneEvents(): Promise<void> {
    const retentionMs = (this.#options.eventsRetentionDays ?? 30) * 86_400_000
    await this.events.prune(new Date(this.#now() - retentionMs).toISOString())
  }

  /** Takes the data directory's lock (when there is one), as FileStore.lock does. */
  lock(): void {
    if (this.#lock === undefined || this.#dataDir === undefined || this.#lock.held) return
    makeDurableDirectory(this.#dataDir)
    this.#lock.acquire()
  }

  /** Loads the driver (refusing the start when it is missing) and makes the pool; idempotent. */
  async connect(): Promise<void> {
    if (this.#pool !== undefined) return
    const pg = this.#options.pg ?? await loadPg()
    const config: PoolConfig = {
      connectionString: this.#options.url,
      max: this.#options.poolSize ?? 10,
      connectionTimeoutMillis: 5000,
      application_name: 'user-service',
    }
    if (this.#options.schema !== undefined) config.options = `-c search_path=${quoteIdentifier(this.#options.schema)},public`
    const pool = new pg.Pool(config)
    // A connection the server ends must not crash the process: the pool's listener covers idle
    // ones, and every connection gets its own for the time it is checked out (pg emits 'error' on
    // the client as well as failing its statement, and an unheard 'error' ends the process). The
    // statement's own failure is what answers and logs the request.
    pool.on('error', (error) => {
      this.#logger.warn('a database connection failed', pgFault(error))
    })
    pool.on('connect', (client) => {
      client.on('error', () => undefined)
    })
    this.#pool = pool
  }

  async open(): Promise<void> {
    this.lock()
    await this.connect()
    const client = await this.#connection().connect()
    try {
      await migrate(client, this.#logger, this.#options.schema)
    } finally {
      client.release()
    }
    this.#probe = setInterval(() => { void this.#check() }, this.#options.probeIntervalMs ?? 1000)
    this.#probe.unref()
    this.#prune = setInterval(() => { this.pruneEvents().catch(() => undefined) }, 60_000)
    this.#prune.unref()
  }

  async close(): Promise<void> {
    clearInterval(this.#probe)
    this.#probe = undefined
    clearInterval(this.#prune)
    this.events.stop()
    const pool = this.#pool
    this.#pool = undefined
    await pool?.end()
    if (this.#lock?.held === true && !this.#lock.release()) {
      this.#logger.warn('could not remove the lock file', { file: this.#lock.file })
    }
  }

  health(): StoreHealth {
    return this.#health
  }

  async get(id: string): Promise<UserRecord | undefined> {
    // No other id is ever stored, and the database would refuse some (a NUL) as input.
    if (!isCanonicalUuid(id)) return undefined
    const result = await this.#query<UserRow>({
      name: 'users_get', text: `SELECT ${USER_COLUMNS} FROM users WHERE id = $1`, values: [id],
    })
    const row = result.rows[0]
    return row === undefined ? undefined : toUserRecord(row)
  }

  async getMany(ids: readonly string[]): Promise<UserRecord[]> {
    // One round trip for the whole batch, whatever its size (at most 100 ids from the API).
    const result = await this.#query<UserRow>({
      name: 'users_get_many', text: `SELECT ${USER_COLUMNS} FROM users WHERE id = ANY($1::text[])`, values: [ids.filter(isCanonicalUuid)],
    })
    return result.rows.map(toUserRecord)
  }

  async isDeleted(id: string): Promise<boolean> {
    if (!isCanonicalUuid(id)) return false
    const result = await this.#query({ name: 'tombstones_has', text: 'SELECT 1 FROM tombstones WHERE id = $1', values: [id] })
    return result.rows.length > 0
  }

  async subjectOf(id: string): Promise<SubjectState> {
    // One round trip for what would be two (the row and its tombstone): this runs on every
    // request whose token's subject is a user id.
    if (!isCanonicalUuid(id)) return { status: undefined, deleted: false }
    const result = await this.#query<{ status: UserStatus | null, deleted: boolean }>({
      name: 'users_subject',
      text: 'SELECT (SELECT status FROM users WHERE id = $1) AS status, EXISTS (SELECT 1 FROM tombstones WHERE id = $1) AS deleted',
      values: [id],
    })
    const row = result.rows[0]
    return { status: row?.status ?? undefined, deleted: row?.deleted === true }
  }

  async list(query: ListQuery): Promise<ListPage> {
    checkStorableQuery(query)
    const { email, q } = query.filter
    const statuses = query.filter.statuses === undefined ? undefined : [...new Set(query.filter.statuses)]
    if (email !== undefined) return this.#listByEmail(query, email.toLowerCase())
    const shape = { order: query.order, after: query.after, statuses }
    if (q === undefined) {
      const rows = (await this.#query<UserRow>(pageShape(shape, query.limit))).rows
      const items = rows.slice(0, query.limit).map(toUserRecord)
      if (rows.length <= query.limit) return { items, hasMore: false }
      return withMore(items, items.at(-1)?.user.id ?? query.after)
    }
    const budget = Math.max(1, query.scanBudget ?? Number.MAX_SAFE_INTEGER - 1)
    const rows = (await this.#query<SearchRow>(searchShape(shape, query.limit, budget, q.toLowerCase()))).rows
    const hits = rows.filter((row) => row.hit)
    if (hits.length > query.limit) {
      const items = hits.slice(0, query.limit).map(toUserRecord)
      return withMore(items, items.at(-1)?.user.id ?? query.after)
    }
    const items = hits.map(toUserRecord)
    // A user past the budget exists: the walk goes on after the last one examined.
    const beyond = rows.some((row) => !row.hit && Number(row.position) === budget + 1)
    if (!beyond) return { items, hasMore: false }
    return withMore(items, rows.find((row) => !row.hit && Number(row.position) === budget)?.id)
  }

  /**
   * Creates are group-committed: those that arrive while a batch's transaction runs go in the
   * next one together (an import, or many POSTs at once, cost one COMMIT per batch, and the event
   * counter's lock is taken once per batch). A row the batch skipped (its id or email is taken,
   * or the id was deleted) is tried again alone, which says why.
   */
  create(user: User, check?: () => void, context?: ChangeContext): Promise<UserRecord> {
    if (!isCanonicalUuid(user.id)) return Promise.reject(new Error(`not a canonical UUID: ${user.id}`))
    try {
      checkStorableUser(user, undefined)
      checkStorableContext(context)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#queues.run(user.id, async () => {
      const record = toRecord(user)
      const inserted = await new Promise<boolean>((resolve, reject) => {
        this.#creates.push({ record, check, context, resolve, reject })
        if (!this.#creating) void this.#createBatches()
      })
      return inserted ? record : this.#createAlone(record, check, context)
    })
  }

  async #createBatches(): Promise<void> {
    this.#creating = true
    while (this.#creates.length > 0) {
      const ready = this.#creates.splice(0, MAX_BATCH).filter((entry) => {
        try {
          entry.check?.()
          return true
        } catch (error) {
          entry.reject(error)
          return false
        }
      })
      if (ready.length === 0) continue
      try {
        const time = this.#time()
        const inserted = await this.#transaction(async (client) => {
          const result = await client.query<{ id: string }>({
            name: 'users_insert_many',
            text: `INSERT INTO users (${STORED_COLUMNS})
              SELECT u.* FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::json[], $8::text[], $9::text[], $10::bigint[])
                AS u(id, email, email_key, name, name_key, status, metadata, created_at, updated_at, version)
              WHERE NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.id = u.id)
              ON CONFLICT DO NOTHING RETURNING id`,
            values: rowColumns(ready.map((entry) => entry.record)),
          })
          return new Set(result.rows.map((row) => row.id))
        }, (ids) => ready
          .filter((entry) => ids.has(entry.record.user.id))
          .flatMap((entry) => one(draftEvent(undefined, entry.record, entry.record.user.id, time, entry.context))))
        for (const entry of ready) entry.resolve(inserted.has(entry.record.user.id))
      } catch (error) {
        // Input the database refused is one row's fault: each row is tried alone, and only the
        // one it belongs to is refused.
        const alone = ready.length > 1 && error instanceof HttpError && error.code === 'bad_request'
        for (const entry of ready) {
          if (alone) entry.resolve(false)
          else entry.reject(error)
        }
      }
    }
    this.#creating = false
  }

  async #createAlone(record: UserRecord, check: (() => void) | undefined, context: ChangeContext | undefined): Promise<UserRecord> {
    check?.()
    const inserted = await this.#transaction((client) => client.query({
      name: 'users_insert',
      text: `INSERT INTO users (${STORED_COLUMNS})
        SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10
        WHERE NOT EXISTS (SELECT 1 FROM tombstones WHERE id = $1)`,
      values: rowValues(record),
    }), (result) => result.rowCount === 1 ? one(draftEvent(undefined, record, record.user.id, this.#time(), context)) : [])
    if (inserted.rowCount !== 1) throw new Error(`user ${record.user.id} already exists or existed`)
    return record
  }

  update(id: string, change: ChangeUser, context?: ChangeContext): Promise<UserRecord> {
    return this.#queues.run(id, async () => {
      for (let attempt = 1; ; attempt += 1) {
        const current = await this.#require(id)
        const next = change(current)
        if (next === undefined) return current
        if (next.id !== id) throw new Error(`a change may not alter the id of user ${id}`)
        checkStorableUser(next, current.user)
        checkStorableContext(context)
        const record = toRecord(next)
        const updated = await this.#transaction((client) => client.query({
          name: 'users_update',
          text: `UPDATE users SET email = $2, email_key = $3, name = $4, name_key = $5, status = $6, metadata = $7,
            created_at = $8, updated_at = $9, version = $10 WHERE id = $1 AND version = $11`,
          values: [...rowValues(record), current.user.version],
        }), (result) => result.rowCount === 1 ? one(draftEvent(current.user, record, id, this.#time(), context)) : [])
        if (updated.rowCount === 1) return record
        // Another replica changed or deleted the user since it was read: read it again.
        if (attempt >= MAX_ATTEMPTS) throw contention(id)
      }
    })
  }

  delete(id: string, check?: (current: UserRecord) => void, context?: ChangeContext): Promise<void> {
    return this.#queues.run(id, async () => {
      for (let attempt = 1; ; attempt += 1) {
        const current = await this.#require(id)
        check?.(current)
        checkStorableContext(context)
        const deletedAt = new Date(this.#now()).toISOString()
        const deleted = await this.#transaction(async (client) => {
          const removed = await client.query({
            name: 'users_delete', text: 'DELETE FROM users WHERE id = $1 AND version = $2', values: [id, current.user.version],
          })
          if (removed.rowCount !== 1) return false
          await client.query({
            name: 'tombstones_insert',
            text: 'INSERT INTO tombstones (id, deleted_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING',
            values: [id, deletedAt],
          })
          return true
        }, (removed) => removed ? one(draftEvent(current.user, undefined, id, deletedAt, context, current.user.version + 1)) : [])
        if (deleted) return
        if (attempt >= MAX_ATTEMPTS) throw contention(id)
      }
    })
  }

  /** An email names at most one user: look it up, then apply the other filters to it. */
  async #listByEmail(query: ListQuery, emailKey: string): Promise<ListPage> {
    const result = await this.#query<UserRow>({
      name: 'users_by_email', text: `SELECT ${USER_COLUMNS} FROM users WHERE email_key = $1`, values: [emailKey],
    })
    const row = result.rows[0]
    if (row === undefined) return { items: [], hasMore: false }
    const record = toUserRecord(row)
    const { statuses, q } = query.filter
    const { after, order } = query
    const needle = q?.toLowerCase()
    const found = (after === undefined || (order === 'asc' ? row.id > after : row.id < after))
      && (statuses === undefined || statuses.includes(row.status))
      && (needle === undefined || record.emailKey.includes(needle) || row.name.toLowerCase().includes(needle))
    return { items: found ? [record] : [], hasMore: false }
  }

  async #require(id: string): Promise<UserRecord> {
    const current = await this.get(id)
    if (current === undefined) throw new HttpError('not_found', 'There is no user with this id.')
    return current
  }

  #time(): string {
    return new Date(this.#now()).toISOString()
  }

  /**
   * Runs the statements of one write in one transaction, and appends the events of its changes
   * (§10), those `events` gives, in the same transaction, last.
   */
  async #transaction<T>(work: (client: PoolClient) => Promise<T>, events: (result: T) => readonly EventDraft[]): Promise<T> {
    let client: PoolClient
    try {
      client = await this.#connection().connect()
    } catch (error) {
      throw this.#unavailable(error)
    }
    let broken = false
    try {
      await client.query('BEGIN')
      const result = await work(client)
      const drafts = events(result)
      await appendEvents(client, drafts)
      await client.query('COMMIT')
      this.#noteSuccess()
      if (drafts.length > 0) this.events.committed()
      return result
    } catch (error) {
      await client.query('ROLLBACK').catch(() => { broken = true })
      if (isUniqueViolation(error, 'users_email_key')) {
        throw new HttpError('duplicate_email', 'Another user already has this email.')
      }
      if (isUniqueViolation(error, 'users_pkey')) throw new Error('a user with this id already exists')
      throw this.#failure(error)
    } finally {
      // A connection whose state is unknown is dropped rather than given to the next write.
      client.release(broken)
    }
  }

  async #query<R extends QueryResultRow>(shape: SqlShape | { name: string, text: string, values: unknown[] }) {
    try {
      const result = await this.#connection().query<R>({ name: shape.name, text: shape.text, values: [...shape.values] })
      this.#noteSuccess()
      return result
    } catch (error) {
      throw this.#failure(error)
    }
  }

  /** Asks the database whether it answers, for /readyz between requests. */
  async #check(): Promise<void> {
    const pool = this.#pool
    if (pool === undefined) return
    try {
      await pool.query('SELECT 1')
      this.#noteSuccess()
    } catch (error) {
      this.#noteFailure(error)
    }
  }

  #noteSuccess(): void {
    if (this.#health.state !== 'ok') {
      this.#logger.info('the database answers again')
      this.#health = HEALTHY
    }
  }

  #noteFailure(error: unknown): void {
    // Readiness turns 503: a warning, since the request that met the fault logs it at error
    // (StorageFaultLog), once, with its requestId; the probe alone logs nothing more.
    if (this.#health.state === 'ok') this.#logger.warn('the database does not answer', pgFault(error))
    this.#health = { state: 'degraded', reason: 'the database does not answer' }
  }

  /**
   * A failed statement: input the database refused is the client's (400, and the database did
   * answer); anything else is a 503 the client may retry, which counts against readiness.
   */
  #failure(error: unknown): unknown {
    if (error instanceof HttpError) return error
    if (classifyPgError(error) === 'input') {
      this.#noteSuccess()
      return toInputError(error)
    }
    return this.#unavailable(error)
  }

  /** The database did not answer: a 503 the client may retry, nothing was changed. */
  #unavailable(error: unknown): unknown {
    if (error instanceof HttpError) return error
    this.#noteFailure(error)
    return new HttpError(
      'storage_unavailable',
      'The database did not answer or refused the request, so nothing was changed. Try again later.',
      { headers: { 'retry-after': '5' }, cause: error },
    )
  }

  #connection(): Pool {
    if (this.#pool === undefined) throw new Error('the PostgreSQL store is not open')
    return this.#pool
  }
}

/** rowValues of many records, column by column, for unnest. */
function rowColumns(records: readonly UserRecord[]): unknown[][] {
  const rows = records.map(rowValues)
  return Array.from({ length: rows[0]?.length ?? 0 }, (_, column) => rows.map((row) => row[column]))
}

function one(draft: EventDraft | undefined): EventDraft[] {
  return draft === undefined ? [] : [draft]
}

function rowValues(record: UserRecord): unknown[] {
  const { user } = record
  return [
    user.id, user.email, record.emailKey, user.name, user.name.toLowerCase(), user.status,
    JSON.stringify(user.metadata), user.createdAt, user.updatedAt, user.version,
  ]
}

/**
 * The record of a row. JSON.parse makes every metadata key an own data property (`__proto__`
 * included), in the order stored: json keeps the text as written.
 */
function toUserRecord(row: UserRow): UserRecord {
  return toRecord({
    id: row.id,
    email: row.email,
    name: row.name,
    status: row.status,
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    version: Number(row.version),
  })
}

function withMore(items: readonly UserRecord[], resumeAfter: string | undefined): ListPage {
  return resumeAfter === undefined ? { items, hasMore: true } : { items, hasMore: true, resumeAfter }
}

function isUniqueViolation(error: unknown, constraint: string): boolean {
  const found = error as { code?: unknown, constraint?: unknown } | null
  return found?.code === UNIQUE_VIOLATION && found.constraint === constraint
}

function contention(id: string): HttpError {
  return new HttpError('storage_unavailable', `User ${id} changed too often at once to apply this change; try again.`, {
    headers: { 'retry-after': '1' },
  })
}

/**
 * What a log line may say of a driver's fault: its code (a SQLSTATE or an errno), never its
 * message, which may quote a client's data.
 */
function pgFault(error: unknown): Record<string, string> {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined
  return { code: typeof code === 'string' ? code : 'none' }
}
