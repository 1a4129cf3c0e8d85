import { randomBytes } from 'node:crypto'
import type { TestContext } from 'node:test'

import pg from 'pg'

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

/** A fresh, empty schema name (the store creates it); it is dropped when the test ends. */
export function freshSchema(t: TestContext): string {
  const schema = `test_${randomBytes(6).toString('hex')}`
  t.after(() => sql(`DROP SCHEMA IF EXISTS ${schema} CASCADE`))
  return schema
}

/** A fresh database for service processes; dropped (after they stop) when the test ends. */
export async function freshDatabase(t: TestContext): Promise<string> {
  const name = `test_${randomBytes(6).toString('hex')}`
  await sql(`CREATE DATABASE ${name}`)
  t.after(() => sql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  const url = new URL(requireDatabaseUrl())
  url.pathname = `/${name}`
  return url.toString()
}
