import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdir, readdir, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { promisify } from 'node:util'

import { PROJECT_ROOT, spawnService } from '../helpers/child.js'
import { makeTempDir } from '../helpers/service.js'

const run = promisify(execFile)

/** Starts the service with these variables and waits for it to give up: its one stderr line. */
async function refusedStart(
  t: TestContext,
  dataDir: string,
  env: Record<string, string>,
  where: { args: string[]; cwd: string } | undefined = undefined,
): Promise<string> {
  const child = spawnService({ dataDir, env, ...where })
  t.after(() => {
    child.proc.kill('SIGKILL')
  })
  const exit = await child.exited
  assert.equal(exit.code, 1, child.stderr())
  assert.doesNotMatch(child.stdout(), /"msg":"listening"/)
  const lines = child.stderr().trimEnd().split('\n')
  assert.equal(lines.length, 1, `one line, no stack: ${child.stderr()}`)
  return lines[0] ?? ''
}

describe('a start the machine refuses says which setting, in one line', () => {
  it('names DATA_DIR when it is a file, not a directory', async (t) => {
    const file = path.join(await makeTempDir(t, 'start-refusal-'), 'a-file')
    await writeFile(file, 'not a directory')
    const line = await refusedStart(t, file, {})
    assert.match(line, /^user-service: cannot start: DATA_DIR .*a-file cannot be used \(E[A-Z]+\)/)
  })

  it('names PORT when another process listens on it, and leaves no lock behind', async (t) => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    t.after(() => new Promise<void>((resolve) => taken.close(() => resolve())))
    const address = taken.address()
    assert.ok(address !== null && typeof address === 'object')
    const dataDir = path.join(await makeTempDir(t, 'start-refusal-'), 'data')
    const line = await refusedStart(t, dataDir, { PORT: String(address.port) })
    assert.equal(
      line,
      `user-service: cannot start: PORT ${address.port} is in use on 127.0.0.1 (EADDRINUSE)`,
    )
    assert.deepEqual(
      (await readdir(dataDir)).filter((name) => name.startsWith('.lock')),
      [],
    )
  })

  it('names HOST when the host has no such address', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'start-refusal-'), 'data')
    const line = await refusedStart(t, dataDir, { HOST: '192.0.2.1' })
    assert.match(
      line,
      /^user-service: cannot start: HOST 192\.0\.2\.1 cannot be listened on \(EADDRNOTAVAIL\)/,
    )
  })

  it('names DATABASE_URL, where it points and what failed, never its password, when no server answers', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'start-refusal-'), 'data')
    const line = await refusedStart(t, dataDir, {
      DATABASE_URL: 'postgres://someone:hunter2-secret@127.0.0.1:1/users',
    })
    assert.equal(
      line,
      'user-service: cannot start: DATABASE_URL (127.0.0.1:1/users) cannot be used: connect ECONNREFUSED 127.0.0.1:1',
    )
    assert.deepEqual(
      (await readdir(dataDir)).filter((name) => name.startsWith('.lock')),
      [],
    )
  })

  it('says npm install pg when DATABASE_URL is set and the driver is missing, and leaves no lock behind', {
    timeout: 60_000,
  }, async (t) => {
    // The one-file bundle, in a directory with no node_modules: import('pg') finds nothing, as in
    // the container images.
    const dir = await makeTempDir(t, 'start-refusal-no-pg-')
    const bundle = path.join(dir, 'user-service.mjs')
    await run(process.execPath, [path.join(PROJECT_ROOT, 'scripts', 'build-bundle.mjs'), bundle], {
      cwd: PROJECT_ROOT,
    })
    const dataDir = path.join(dir, 'data')
    const line = await refusedStart(
      t,
      dataDir,
      { DATABASE_URL: 'postgres://someone@127.0.0.1:1/users' },
      { args: [bundle], cwd: dir },
    )
    assert.equal(
      line,
      'user-service: cannot start: DATABASE_URL is set but the PostgreSQL driver is not installed: npm install pg',
    )
    assert.deepEqual(
      (await readdir(dataDir)).filter((name) => name.startsWith('.lock')),
      [],
    )
  })

  it('names BASE_PATH when it holds a dot segment', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'start-refusal-'), 'data')
    const line = await refusedStart(t, dataDir, { BASE_PATH: '/..' })
    assert.equal(
      line,
      'user-service: cannot start: BASE_PATH must not hold a . or .. segment, got "/.."',
    )
  })

  it('exits 1 when the store cannot load after listening, and leaves no lock behind', {
    timeout: 30_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'start-refusal-'), 'data')
    await mkdir(dataDir)
    // A file where the event log's directory must be: the load fails after the server listens.
    await writeFile(path.join(dataDir, 'events'), 'not a directory')
    const child = spawnService({ dataDir, env: {} })
    t.after(() => {
      child.proc.kill('SIGKILL')
    })
    const exit = await child.exited
    assert.equal(exit.code, 1, child.stderr())
    assert.match(child.stdout(), /"msg":"could not load the store".*events/)
    assert.deepEqual(
      (await readdir(dataDir)).filter((name) => name.startsWith('.lock')),
      [],
    )
  })
})
