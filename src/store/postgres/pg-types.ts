/**
 * The few shapes of the `pg` driver the PostgreSQL store uses, as the project's own types: `pg` is
 * an optional peer dependency that ships no types, so the published declarations may not name
 * it (a user without `@types/pg` would get "Cannot find module 'pg'" from them). `pg` 8.x has
 * every member below; the tests that pass the real module as a `PgModule` check that it fits.
 */

/** A row as the driver gives it: columns by name. */
export interface QueryResultRow {
  readonly [column: string]: unknown
}

/** What a statement answers: its rows, and how many rows it touched (null when not counted). */
export interface QueryResult<R extends QueryResultRow = QueryResultRow> {
  rows: R[]
  rowCount: number | null
}

/** A statement with its values; named, it is prepared once per connection. */
export interface QueryConfig {
  readonly text: string
  readonly name?: string
  readonly values?: readonly unknown[]
  /** Milliseconds the driver waits for the answer before failing the statement (none: the pool's). */
  readonly query_timeout?: number
}

/** What both a pool and a checked-out client run statements with. */
export interface Queryable {
  query<R extends QueryResultRow = QueryResultRow>(
    text: string,
    values?: readonly unknown[],
  ): Promise<QueryResult<R>>
  query<R extends QueryResultRow = QueryResultRow>(config: QueryConfig): Promise<QueryResult<R>>
}

/** A connection checked out of the pool; `release(true)` drops it instead of giving it back. */
export interface PoolClient extends Queryable {
  release(destroy?: boolean): void
  /** Closes the connection; a statement still running fails (pg destroys the socket under it). */
  end(): Promise<void>
  on(event: 'error', listener: (error: Error) => void): unknown
  on(event: 'end', listener: () => void): unknown
  on(event: 'notification', listener: (message: { payload?: string | undefined }) => void): unknown
  removeAllListeners(event: 'notification'): unknown
}

/** The settings a pool is made with. */
export interface PoolConfig {
  connectionString: string
  max: number
  connectionTimeoutMillis: number
  idleTimeoutMillis?: number
  application_name: string
  /** Startup options of every session (`-c name=value …`). */
  options?: string
  /** Milliseconds the driver waits for any statement's answer (none: forever). */
  query_timeout?: number
}

/** A pool of connections. */
export interface Pool extends Queryable {
  connect(): Promise<PoolClient>
  end(): Promise<void>
  on(event: 'error', listener: (error: Error) => void): unknown
  on(event: 'connect', listener: (client: PoolClient) => void): unknown
  /** A connection checked out (also for a pool's own query()), and given back. */
  on(event: 'acquire', listener: (client: PoolClient) => void): unknown
  on(event: 'release', listener: (error: Error | undefined, client: PoolClient) => void): unknown
}

/** The part of the `pg` module the store uses. */
export interface PgModule {
  Pool: new (config: PoolConfig) => Pool
}
