import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { copyFile, readFile, stat, symlink } from 'node:fs/promises'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { describe, it, type TestContext } from 'node:test'
import { promisify } from 'node:util'

import type { User } from '../src/domain/user.js'
import { checkAdminPageServed } from './helpers/admin-page.js'
import { PROJECT_ROOT } from './helpers/child.js'
import { request } from './helpers/http.js'
import { waitFor } from './helpers/ops.js'
import { DATABASE_URL, freshDatabase } from './helpers/postgres.js'
import { makeTempDir, uniqueEmail } from './helpers/service.js'
import { TEST_SECRET } from './helpers/tokens.js'

const run = promisify(execFile)

/** A clean environment: only what a user would set, nothing of this test run (coverage, tsx). */
function serviceEnv(dataDir: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: process.env['HOME'] ?? '/tmp',
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    JWT_SECRET: TEST_SECRET,
  }
}

function withoutCoverage(): NodeJS.ProcessEnv {
  const env = { ...process.env }
  delete env['NODE_V8_COVERAGE']
  delete env['NODE_TEST_CONTEXT']
  return env
}

interface Spawned {
  readonly child: ChildProcess
  /** What it wrote so far to stdout and stderr. */
  out(): string
  err(): string
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Spawns a form of the service, killed when the test ends, its output gathered. */
function spawnForm(
  t: TestContext,
  command: string,
  args: readonly string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
): Spawned {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] })
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let out = ''
  let err = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
  })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      resolve({ code, signal })
    })
  })
  return { child, out: () => out, err: () => err, exited }
}

/**
 * Starts one form of the service (`command` plus `args`) in `cwd`, and checks what every form
 * promises: the listening line, /healthz, a created user, a token from its own `token` subcommand,
 * and exit 0 on SIGTERM. Returns the time from spawn to the listening line.
 */
async function checkForm(
  t: TestContext,
  cwd: string,
  command: string,
  args: readonly string[],
): Promise<number> {
  const dataDir = path.join(cwd, 'data')
  const env = serviceEnv(dataDir)
  const started = performance.now()
  const { child, out, err, exited } = spawnForm(t, command, args, { cwd, env })
  const url = await waitFor(
    'the listening line',
    () => {
      assert.equal(child.exitCode, null, `the service exited:\n${out()}\n${err()}`)
      return /"msg":"listening","url":"([^"]+)"/.exec(out())?.[1]
    },
    30_000,
    10,
  )
  const startupMs = performance.now() - started

  const health = await request('GET', `${url}/healthz`)
  assert.equal(health.status, 200)
  assert.deepEqual(health.body, { status: 'ok' })
  await waitFor(
    'readiness',
    async () => ((await request('GET', `${url}/readyz`)).status === 200 ? true : undefined),
    15_000,
  )
  // The admin page, carried inside: no file beside the service.
  await checkAdminPageServed(url)

  const token = await run(
    command,
    [...args, 'token', '--sub', 'one-file', '--scope', 'users:read users:write'],
    { cwd, env },
  )
  const bearer = token.stdout.trim()
  assert.match(bearer, /^[\w-]+\.[\w-]+\.[\w-]+$/)
  const email = uniqueEmail('one-file')
  const created = await request('POST', `${url}/users`, {
    token: bearer,
    json: { email, name: 'One File' },
  })
  assert.equal(created.status, 201, created.text)
  const user = created.json<User>()
  assert.ok(existsSync(path.join(dataDir, 'users', `${user.id}.json`)))
  const read = await request('GET', `${url}/users/${user.id}`, { token: bearer })
  assert.equal(read.status, 200)
  assert.equal(read.json<User>().email, email)

  child.kill('SIGTERM')
  const exit = await exited
  assert.deepEqual(exit, { code: 0, signal: null }, `${out()}\n${err()}`)
  assert.match(out(), /"msg":"stopped"/)
  return startupMs
}

/** esbuild's wrappers of a module that an import() or a require() loads when first asked for. */
const LAZY_WRAPPER = /\b__(?:esm|commonJS)\(\{/

describe('one ES module: node user-service.mjs', () => {
  it('builds with npm run build:bundle and runs with plain node and no node_modules', {
    timeout: 90_000,
  }, async (t) => {
    const dir = await makeTempDir(t, 'user-service-one-file-')
    const bundle = path.join(dir, 'user-service.mjs')
    await run(process.execPath, [path.join(PROJECT_ROOT, 'scripts', 'build-bundle.mjs'), bundle], {
      cwd: PROJECT_ROOT,
      env: withoutCoverage(),
      timeout: 60_000,
    })
    const { size } = await stat(bundle)
    // docs/embedding.md gives the size a reader will find; it must stay near what is built.
    const documented = /\| `node dist\/user-service\.mjs` \| 1 \| ([\d.]+) KiB \|/.exec(
      await readFile(path.join(PROJECT_ROOT, 'docs', 'embedding.md'), 'utf8'),
    )?.[1]
    assert.ok(documented !== undefined, 'docs/embedding.md gives the bundle size in KiB')
    const ratio = size / 1024 / Number(documented)
    assert.ok(
      ratio > 0.85 && ratio < 1.15,
      `docs/embedding.md says ${documented} KiB; the bundle is ${(size / 1024).toFixed(0)} KiB`,
    )
    // No module in it is wrapped to load later (scripts/eager-imports.mjs): such a module's
    // constants are variables to V8, which cost the request path 12% on Node 20.
    assert.doesNotMatch(await readFile(bundle, 'utf8'), LAZY_WRAPPER)
    const startupMs = await checkForm(t, dir, process.execPath, [bundle])
    t.diagnostic(
      `user-service.mjs: ${(size / 1024).toFixed(0)} KiB, ready in ${startupMs.toFixed(0)} ms`,
    )

    const unknown = await run(process.execPath, [bundle, 'frobnicate'], { cwd: dir }).catch(
      (error: { code: number; stderr: string }) => error,
    )
    assert.equal('code' in unknown ? unknown.code : 0, 2)
    assert.match('stderr' in unknown ? unknown.stderr : '', /unknown command "frobnicate"/)
  })
})

describe('single executable application: ./user-service', () => {
  it('builds with npm run build:sea and runs without node', { timeout: 120_000 }, async (t) => {
    if (process.platform !== 'linux' || process.arch !== 'x64') {
      t.skip(
        `the single executable is built for Linux x64 only; this is ${process.platform} ${process.arch}`,
      )
      return
    }
    const dir = await makeTempDir(t, 'user-service-sea-')
    const built = await run(
      process.execPath,
      [path.join(PROJECT_ROOT, 'scripts', 'build-sea.mjs'), path.join(dir, 'build')],
      {
        cwd: PROJECT_ROOT,
        env: withoutCoverage(),
        timeout: 90_000,
      },
    ).catch((error: Error & { stderr?: string }) => error)
    if (built instanceof Error) {
      // Out of our hands: a node binary without the SEA fuse (some distributions build it so) or postject failing on it.
      t.skip(
        `build:sea failed with this node (${process.execPath}, ${process.version}): ${built.stderr ?? built.message}`,
      )
      return
    }
    const executable = path.join(dir, 'build', 'user-service')
    const script = path.join(dir, 'build', 'sea', 'user-service.cjs')
    assert.doesNotMatch(await readFile(script, 'utf8'), LAZY_WRAPPER)
    // Moved away from the build: one file and nothing else.
    const alone = path.join(dir, 'alone')
    await run('mkdir', [alone])
    await copyFile(executable, path.join(alone, 'user-service'))
    await run('chmod', ['755', path.join(alone, 'user-service')])
    const { size } = await stat(executable)
    const startupMs = await checkForm(t, alone, path.join(alone, 'user-service'), [])
    t.diagnostic(
      `user-service (SEA): ${(size / 1024 / 1024).toFixed(1)} MiB, ready in ${startupMs.toFixed(0)} ms`,
    )
    if (DATABASE_URL === undefined) {
      t.diagnostic('WORKERS=2 not checked: DATABASE_URL is not set (scripts/with-postgres.sh)')
      return
    }
    // WORKERS=2 on PostgreSQL: node:cluster forks the executable again, with its own path as the
    // script; each worker serves, and the primary stops them all with exit 0. The driver is
    // installed beside the executable (`npm install pg` in its folder), where it looks for it.
    await run('mkdir', [path.join(alone, 'node_modules')])
    await symlink(
      path.join(PROJECT_ROOT, 'node_modules', 'pg'),
      path.join(alone, 'node_modules', 'pg'),
    )
    const database = await freshDatabase(t)
    const { child, out, err, exited } = spawnForm(t, path.join(alone, 'user-service'), [], {
      cwd: alone,
      env: { ...serviceEnv(path.join(alone, 'data-pg')), DATABASE_URL: database, WORKERS: '2' },
    })
    const listening = await waitFor(
      'two workers listening',
      () => {
        assert.equal(child.exitCode, null, `the service exited:\n${out()}\n${err()}`)
        const lines = out().match(/"msg":"listening"/g) ?? []
        return lines.length === 2 ? /"msg":"listening","url":"([^"]+)"/.exec(out())?.[1] : undefined
      },
      30_000,
      20,
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${out()}\n${err()}`)
    })
    assert.equal((await request('GET', `${listening}/healthz`)).status, 200)
    child.kill('SIGTERM')
    assert.deepEqual(await exited, { code: 0, signal: null }, `${out()}\n${err()}`)
  })
})
