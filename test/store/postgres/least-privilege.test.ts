import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'

import { startChild } from '../../helpers/child.js'
import { request } from '../../helpers/http.js'
import { freshDatabase, SKIP_POSTGRES, sql } from '../../helpers/postgres.js'
import { makeTempDir, uniqueEmail } from '../../helpers/service.js'
import { makeToken } from '../../helpers/tokens.js'

const admin = makeToken()

describe('a role that may only read and write the tables', { skip: SKIP_POSTGRES }, () => {
  it('starts and serves on a database another role migrated, and creates nothing', {
    timeout: 60_000,
  }, async (t) => {
    const url = await freshDatabase(t)
    // Nobody but the owner may create in the database's public schema (PostgreSQL 15's default;
    // 14 lets every role create there).
    await sql('REVOKE CREATE ON SCHEMA public FROM PUBLIC', [], url)
    const owner = await startChild(
      { dataDir: await makeTempDir(t, 'pg-owner-'), env: { DATABASE_URL: url } },
      30_000,
    )
    await owner.stop('SIGTERM')

    const role = `app_${randomBytes(4).toString('hex')}`
    await sql(`CREATE ROLE ${role} LOGIN`)
    t.after(async () => {
      await sql(`DROP OWNED BY ${role}`, [], url).catch(() => undefined)
      await sql(`DROP ROLE IF EXISTS ${role}`)
    })
    await sql(
      `GRANT USAGE ON SCHEMA public TO ${role}; ` +
        `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`,
      [],
      url,
    )
    const asRole = new URL(url)
    asRole.username = role
    asRole.password = ''
    const before = await sql(
      "SELECT count(*)::int AS n FROM pg_class WHERE relnamespace = 'public'::regnamespace",
      [],
      url,
    )

    const service = await startChild(
      { dataDir: await makeTempDir(t, 'pg-role-'), env: { DATABASE_URL: asRole.toString() } },
      30_000,
    )
    t.after(() => service.stop('SIGKILL'))
    const created = await request('POST', `${service.url}/users`, {
      token: admin,
      json: { email: uniqueEmail(), name: 'Least Privilege' },
    })
    assert.equal(created.status, 201, created.text)
    const listed = await request('GET', `${service.url}/users?q=least`, { token: admin })
    assert.equal(listed.status, 200, listed.text)
    assert.equal(listed.json<{ items: unknown[] }>().items.length, 1)
    const after = await sql(
      "SELECT count(*)::int AS n FROM pg_class WHERE relnamespace = 'public'::regnamespace",
      [],
      url,
    )
    assert.equal(after.rows[0]?.n, before.rows[0]?.n)
    assert.doesNotMatch(service.stderr(), /permission denied/)
  })
})
