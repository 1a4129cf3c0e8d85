import { randomBytes } from 'node:crypto'
import type { TestContext } from 'node:test'

import pg from 'pg'

import { PostgresStore } from '../../src/store/postgres/postgres-store.js'

/** The database the PostgreSQL tests use, or undefined: then they skip. */
export const DATABASE_URL = process.env['DATABASE_URL']

/** The one line a run without PostgreSQL prints for each skipped suite. */
export const SKIP_POSTGRES =
  DATABASE_URL === undefined
    ? 'DATABASE_URL is not set: run scripts/with-postgres.sh npm test'
    : false

export function requireDatabaseUrl(): string {
  if (DATABASE_URL === undefined) throw new Error('DATABASE_URL is not set')
  return DATABASE_URL
}

/** Runs SQL as the test's role on DATABASE_URL (or another database's URL). */
export async function sql(
  text: string,
  values: unknown[] = [],
  url = requireDatabaseUrl(),
): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await client.query(text, values)
  } finally {
    await client.end()
  }
}

/**
 * A store on `schema` as one replica would open it, closed when the test ends: events are polled
 * every 50 ms, so that what another replica commits shows soon.
 */
export function replicaStore(t: TestContext, schema: string): PostgresStore {
  const store = new PostgresStore({ url: requireDatabaseUrl(), schema, eventPollMs: 50 })
  t.after(() => store.close())
  return store
}

/** A fresh, empty schema name (the store creates it); it is dropped when the test ends. */
export function freshSchema(t: TestContext): string {
  const schema = `test_${randomBytes(6).toString('hex')}`
  t.after(() => dropSchema(schema))
  return schema
}

/**
 * Drops a test's schema. After-hooks run in the order they were added, so this one usually runs
 * while the test's store is still open and its feed still reads `events` and `event_counter`;
 * DROP … CASCADE locks the tables one by one and can meet such a read in a deadlock, which
 * PostgreSQL breaks by failing one side (40P01). The drop is then tried again: a failed after-hook
 * skips the later ones, and a store left open keeps the test file's process alive.
 */
async function dropSchema(schema: string): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await sql(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      return
    } catch (error) {
      const deadlock = error instanceof Error && 'code' in error && error.code === '40P01'
      if (!deadlock || attempt === 20) throw error
      await new Promise((resolve) => setTimeout(resolve, 25 * attempt))
    }
  }
}

/**
 * A fresh database for service processes, made with CREATE DATABASE `options` (an encoding…);
 * dropped (after they stop) when the test ends.
 */
export async function freshDatabase(t: TestContext, options = ''): Promise<string> {
  const name = `test_${randomBytes(6).toString('hex')}`
  await sql(`CREATE DATABASE ${name} ${options}`)
  t.after(() => sql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  const url = new URL(requireDatabaseUrl())
  url.pathname = `/${name}`
  return url.toString()
}
