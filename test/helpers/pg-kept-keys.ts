import type { TestContext } from 'node:test'

import type { KeptKey, KeyToKeep } from '../../src/domain/kept-key.js'
import type { UserRecord } from '../../src/domain/user.js'
import {
  PostgresStore,
  type PostgresStoreOptions,
} from '../../src/store/postgres/postgres-store.js'
import { requireDatabaseUrl, sql } from './postgres.js'

/** A key's retention and its second: 24 h + 1 s. */
export const DAY_MS = 86_401_000

/** An open store on `schema`, closed when the test ends (closing twice is harmless). */
export async function openOn(
  t: TestContext,
  schema: string,
  options: Partial<PostgresStoreOptions> = {},
): Promise<PostgresStore> {
  const store = new PostgresStore({ url: requireDatabaseUrl(), schema, ...options })
  t.after(() => store.close())
  await store.open()
  return store
}

/**
 * What the HTTP layer hands a store with a keyed change: the answer made of the change's record
 * (a 201 with the user, or a 204 for a deletion); `calls` counts the store's calls of `keep`.
 */
export function keyed(
  subject: string,
  key: string,
  fingerprint = 'a'.repeat(64),
  expiresAt = Date.now() + DAY_MS,
): KeyToKeep & { readonly calls: number } {
  let calls = 0
  return {
    get calls() {
      return calls
    },
    keep(record: UserRecord | undefined): KeptKey {
      calls += 1
      return {
        subject,
        key,
        fingerprint,
        answer:
          record === undefined
            ? { status: 204 }
            : {
                status: 201,
                body: record.json,
                contentType: 'application/json',
                etag: `"${record.user.version}"`,
                headers: { location: `/users/${record.user.id}` },
              },
        expiresAt,
      }
    },
  }
}

/** The rows of the keys table: who, what status, which holder, and whether it is a hold. */
export async function keyRows(schema: string): Promise<Record<string, unknown>[]> {
  const found = await sql(
    `SELECT subject, key, status, holder, held_until IS NOT NULL AS held FROM ${schema}.idempotency_keys ORDER BY subject, key`,
  )
  return found.rows as Record<string, unknown>[]
}

export async function eventCount(schema: string): Promise<number> {
  const found = await sql(`SELECT count(*)::int AS n FROM ${schema}.events`)
  return Number(found.rows[0]?.n)
}

export async function waitFor(
  what: string,
  condition: () => Promise<boolean>,
  ms = 20_000,
): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}
