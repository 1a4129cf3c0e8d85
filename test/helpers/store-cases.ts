import type { TestContext } from 'node:test'

import type { UserServiceOptions } from '../../src/process/create-user-service.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from './postgres.js'

/** A store the API tests run on: its service options, made per test. */
export interface StoreCase {
  readonly name: string
  readonly skip: string | boolean
  readonly make: (t: TestContext) => Partial<UserServiceOptions>
}

/** Memory, file, and PostgreSQL when DATABASE_URL is set (a fresh schema per test). */
export const STORES: readonly StoreCase[] = [
  { name: 'memory', skip: false, make: () => ({ store: new MemoryStore() }) },
  { name: 'file', skip: false, make: () => ({}) },
  {
    name: 'PostgreSQL',
    skip: SKIP_POSTGRES,
    make: (t) => {
      const store = new PostgresStore({
        url: requireDatabaseUrl(),
        schema: freshSchema(t),
        eventPollMs: 50,
      })
      t.after(() => store.close())
      return { store }
    },
  },
]
