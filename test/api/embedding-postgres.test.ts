import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'

import { build } from 'esbuild'

import type { PostgresStoreOptions, User } from '../../src/index.js'
import { createUserService, PostgresStore } from '../../src/index.js'
import { PROJECT_ROOT } from '../helpers/child.js'
import { request, type UserPage } from '../helpers/http.js'
import { freshDatabase, SKIP_POSTGRES, sql } from '../helpers/postgres.js'
import { makeToken, TEST_SECRET } from '../helpers/tokens.js'

const run = promisify(execFile)

/** A port nothing listens on: connecting is refused at once. */
const UNREACHABLE = 'postgres://user:pass@127.0.0.1:1/none'

describe('the package entry without the pg driver', () => {
  it('exports PostgresStore and loads without pg installed; the store asks for pg only when it connects', {
    timeout: 60_000,
  }, async (t) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'entry-no-pg-'))
    t.after(() => {
      rmSync(dir, { recursive: true, force: true })
    })
    // The entry as one module with pg left as an import, run where no node_modules can be found.
    await build({
      entryPoints: [path.join(PROJECT_ROOT, 'src', 'index.ts')],
      outfile: path.join(dir, 'index.mjs'),
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      external: ['pg'],
      logLevel: 'error',
    })
    writeFileSync(
      path.join(dir, 'probe.mjs'),
      `
      const entry = await import('./index.mjs')
      const service = entry.createUserService({ databaseUrl: ${JSON.stringify(UNREACHABLE)}, secret: ${JSON.stringify(TEST_SECRET)} })
      const opened = await service.open().then(() => 'opened', (error) => error.message)
      await service.close()
      console.log(JSON.stringify({ isClass: typeof entry.PostgresStore, isPostgres: service.store instanceof entry.PostgresStore, opened }))
    `,
    )
    const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin' }
    const { stdout } = await run(process.execPath, ['probe.mjs'], {
      cwd: dir,
      env,
      timeout: 30_000,
    })
    assert.deepEqual(JSON.parse(stdout), {
      isClass: 'function',
      isPostgres: true,
      opened: 'DATABASE_URL is set but the PostgreSQL driver is not installed: npm install pg',
    })
  })

  it('builds a PostgresStore from databaseUrl, and open() rejects when the database cannot be reached', async () => {
    const options: PostgresStoreOptions = { url: UNREACHABLE }
    assert.equal(options.url, UNREACHABLE)
    const service = createUserService({ databaseUrl: UNREACHABLE, secret: TEST_SECRET })
    assert.ok(service.store instanceof PostgresStore)
    await assert.rejects(service.open(), /ECONNREFUSED|connect/)
    await service.close()
  })

  it('keeps a given store over databaseUrl', async () => {
    const store = new PostgresStore({ url: UNREACHABLE })
    const service = createUserService({
      store,
      databaseUrl: 'postgres://127.0.0.1:2/other',
      secret: TEST_SECRET,
    })
    assert.equal(service.store, store)
    await service.close()
  })
})

describe('embedding with databaseUrl', { skip: SKIP_POSTGRES }, () => {
  it('serves users stored in PostgreSQL, which a second embedded service on the same database sees', async (t) => {
    const databaseUrl = await freshDatabase(t)
    const token = makeToken()
    const first = createUserService({ databaseUrl, secret: TEST_SECRET, basePath: '/api' })
    const { url } = await first.listen()
    t.after(() => first.close())
    for (let wait = 0; (await request('GET', `${url}/readyz`)).status !== 200; wait += 1) {
      assert.ok(wait < 500, 'the embedded service never became ready')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }

    const created = await request('POST', `${url}/api/users`, {
      token,
      json: { email: 'pg@example.com', name: 'In PostgreSQL' },
    })
    assert.equal(created.status, 201, created.text)
    const user = created.json<User>()
    const rows = await sql(
      'SELECT id, email, version FROM users WHERE id = $1',
      [user.id],
      databaseUrl,
    )
    // version is a bigint column (migration 3), which the driver gives as text.
    assert.deepEqual(rows.rows, [{ id: user.id, email: 'pg@example.com', version: '1' }])

    const second = createUserService({ databaseUrl, secret: TEST_SECRET })
    await second.open()
    t.after(() => second.close())
    assert.equal((await second.store.get(user.id))?.json, JSON.stringify(user))

    const list = await request('GET', `${url}/api/users`, { token })
    assert.equal(list.status, 200, list.text)
    assert.deepEqual(
      list.json<UserPage>().items.map((item) => item.id),
      [user.id],
    )
  })
})
