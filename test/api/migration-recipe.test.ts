import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { promisify } from 'node:util'

import type { User } from '../../src/domain/user.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import { PROJECT_ROOT } from '../helpers/child.js'
import { assertProblem } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../helpers/postgres.js'
import { makeTempDir, startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const run = promisify(execFile)

/** The shell block under "Moving from the file store to PostgreSQL" in docs/bulk.md, as written. */
function readRecipe(): string {
  const doc = readFileSync(path.join(PROJECT_ROOT, 'docs', 'bulk.md'), 'utf8')
  const heading = doc.indexOf('## Moving from the file store to PostgreSQL')
  assert.notEqual(heading, -1, 'docs/bulk.md has the migration recipe')
  const block = /```sh\n([\s\S]*?)```/.exec(doc.slice(heading))
  assert.ok(block?.[1] !== undefined, 'the recipe is a sh block')
  return block[1]
}

async function exportText(app: TestService): Promise<string> {
  const res = await fetch(`${app.baseUrl}/users:export`, {
    headers: { authorization: `Bearer ${app.token}` },
  })
  assert.equal(res.status, 200)
  return res.text()
}

/** A source with users in every state, one changed, one deleted, and metadata in a set order. */
async function fillSource(app: TestService): Promise<void> {
  for (let i = 0; i < 12; i += 1) {
    const user = await app.createUser({
      email: uniqueEmail('Recipe'),
      metadata: { zeta: String(i), alpha: 'a' },
    })
    if (i % 3 === 1)
      assert.equal((await app.call('POST', `/users/${user.id}:activate`)).status, 200)
    if (i % 4 === 0)
      assert.equal(
        (await app.call('PATCH', `/users/${user.id}`, { json: { name: `Renamed ${i}` } })).status,
        200,
      )
    if (i === 5) assert.equal((await app.call('DELETE', `/users/${user.id}`)).status, 204)
  }
}

/**
 * Runs the recipe with bash and the real curl in a fresh directory, and gives the directory:
 * `old:8080` and `new:8080` reach the two services through curl's own `connect-to` (from a
 * .curlrc), so not a word of the recipe is changed.
 */
async function runRecipe(
  t: TestContext,
  source: TestService,
  target: TestService,
  token = source.token,
): Promise<{ dir: string; ran: Promise<unknown> }> {
  const dir = await makeTempDir(t, 'migration-recipe-')
  const port = (app: TestService): string => new URL(app.url).port
  writeFileSync(
    path.join(dir, '.curlrc'),
    `connect-to = old:8080:127.0.0.1:${port(source)}\nconnect-to = new:8080:127.0.0.1:${port(target)}\n`,
  )
  const env = {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    CURL_HOME: dir,
    HOME: dir,
    DATA_DIR: source.dataDir,
    ADMIN_TOKEN: token,
  }
  return { dir, ran: run('bash', ['-c', readRecipe()], { cwd: dir, env, timeout: 30_000 }) }
}

async function checkMigration(t: TestContext, target: TestService): Promise<void> {
  const source = await startService(t)
  await fillSource(source)
  const before = await exportText(source)
  assert.equal(before.split('\n').filter((line) => line !== '').length, 11)
  const { dir, ran } = await runRecipe(t, source, target)
  await ran.catch((error: unknown) => {
    const { code, stdout, stderr } = error as { code?: unknown; stdout?: string; stderr?: string }
    assert.fail(`the recipe failed (exit ${String(code)}):\n${stderr ?? ''}\n${stdout ?? ''}`)
  })

  // Step 1 saved the users, not a problem.
  assert.equal(readFileSync(path.join(dir, 'users.ndjson'), 'utf8'), before)
  const results = readFileSync(path.join(dir, 'results.ndjson'), 'utf8')
    .split('\n')
    .filter((line) => line !== '')
  assert.deepEqual(
    results.map((line) => (JSON.parse(line) as { status: number }).status),
    Array.from({ length: 11 }, () => 201),
  )
  assert.equal(await exportText(target), before)

  // The old service is in maintenance: every write refused, the export alone still served.
  assertProblem(
    await source.call('POST', '/users', { json: { email: uniqueEmail(), name: 'Too Late' } }),
    503,
    'maintenance',
  )
  assertProblem(
    await source.call('POST', '/users:import', {
      body: `${JSON.stringify({ email: uniqueEmail(), name: 'Too Late' })}\n`,
      contentType: 'application/x-ndjson',
    }),
    503,
    'maintenance',
  )
  const first = JSON.parse(before.split('\n')[0] ?? '') as User
  assertProblem(
    await source.call('PATCH', `/users/${first.id}`, { json: { name: 'Too Late' } }),
    503,
    'maintenance',
  )
  assertProblem(await source.call('GET', '/users'), 503, 'maintenance')
  assert.equal(await exportText(source), before)
}

describe('the migration recipe of docs/bulk.md, run as written', () => {
  it('lists every curl with -f, so that an error is never saved as data', () => {
    const curls = readRecipe()
      .split('\n')
      .map((line) => line.replace(/#.*$/, ''))
      .filter((line) => /\bcurl\b/.test(line))
    assert.ok(curls.length >= 3)
    for (const line of curls) assert.match(line, /\bcurl -fsS /, line)
  })

  it('moves every user from one file store to another and checks it', {
    timeout: 60_000,
  }, async (t) => {
    await checkMigration(t, await startService(t))
  })

  it('moves every user from the file store to PostgreSQL and checks it', {
    skip: SKIP_POSTGRES,
    timeout: 60_000,
  }, async (t) => {
    await checkMigration(
      t,
      await startService(t, {
        store: new PostgresStore({ url: requireDatabaseUrl(), schema: freshSchema(t) }),
      }),
    )
  })

  it('stops at step 1 when the old service refuses the export, saving nothing as users', {
    timeout: 60_000,
  }, async (t) => {
    const source = await startService(t)
    await fillSource(source)
    const target = await startService(t)
    // The token has no users:admin scope: the export is a 403 problem, which curl -f refuses.
    const { dir, ran } = await runRecipe(t, source, target, makeToken({ scope: 'users:read' }))
    await assert.rejects(ran, (error: { code?: unknown; stderr?: string }) => {
      assert.equal(error.code, 22, 'curl -f exits 22 on an HTTP error')
      assert.match(error.stderr ?? '', /403/)
      return true
    })
    assert.equal(
      readFileSync(path.join(dir, 'users.ndjson'), 'utf8'),
      '',
      'no problem was saved as users',
    )
    assert.deepEqual(await target.snapshot(), [], 'nothing was imported')
    // Step 1 had begun: the old service went into maintenance.
    await waitFor('maintenance to be noticed', async () =>
      (await source.call('GET', '/users')).status === 503 ? true : undefined,
    )
  })
})
