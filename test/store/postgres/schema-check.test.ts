import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'

import { PostgresStore } from '../../../src/store/postgres/postgres-store.js'
import { SCHEMA_COLUMNS } from '../../../src/store/postgres/schema-check.js'
import { spawnService } from '../../helpers/child.js'
import { waitFor } from '../../helpers/ops.js'
import {
  freshDatabase,
  freshSchema,
  requireDatabaseUrl,
  SKIP_POSTGRES,
  sql,
} from '../../helpers/postgres.js'
import { makeTempDir } from '../../helpers/service.js'

describe('a schema changed by hand', { skip: SKIP_POSTGRES }, () => {
  it('lists every table and column a freshly migrated schema has', async (t) => {
    const schema = freshSchema(t)
    const store = new PostgresStore({ url: requireDatabaseUrl(), schema })
    await store.open()
    await store.close()
    const found = await sql(
      `SELECT table_name, column_name FROM information_schema.columns
        WHERE table_schema = $1 ORDER BY table_name, ordinal_position`,
      [schema],
    )
    const migrated: Record<string, string[]> = {}
    for (const row of found.rows as { table_name: string; column_name: string }[]) {
      migrated[row.table_name] = [...(migrated[row.table_name] ?? []), row.column_name]
    }
    const listed = Object.fromEntries(
      Object.entries(SCHEMA_COLUMNS).map(([table, columns]) => [table, [...columns]]),
    )
    assert.deepEqual(listed, migrated)
  })

  it('refuses the start in one line naming the dropped column, instead of serving 503s as ready', async (t) => {
    const url = await freshDatabase(t)
    const store = new PostgresStore({ url })
    await store.open()
    await store.close()
    await sql('ALTER TABLE users DROP COLUMN name', [], url)
    const where = new URL(url)
    const dataDir = path.join(await makeTempDir(t, 'schema-check-'), 'data')
    const child = spawnService({ dataDir, env: { DATABASE_URL: url } })
    t.after(() => {
      child.proc.kill('SIGKILL')
    })
    // Before the check, the service started and said it was ready: do not wait for an exit then.
    const listening = waitFor(
      'the listening line',
      () => (/"msg":"listening"/.test(child.stdout()) ? 'listening' : undefined),
      20_000,
    ).catch(() => 'neither')
    const ended = await Promise.race([child.exited.then(() => 'exited'), listening])
    assert.equal(ended, 'exited', `the start went on: ${child.stdout()}`)
    assert.equal((await child.exited).code, 1, child.stderr())
    const lines = child.stderr().trimEnd().split('\n')
    assert.equal(lines.length, 1, child.stderr())
    assert.equal(
      lines[0],
      `user-service: cannot start: DATABASE_URL (${where.hostname}:${where.port}${where.pathname}) cannot be used: the database schema is recorded as current but lacks column users.name: it was changed by hand or restored in part; restore it from a backup`,
    )
  })
})
