import assert from 'node:assert/strict'
import { readdir, readFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import path from 'node:path'
import { describe, it } from 'node:test'

import { spawnService, startChild, waitForOutput } from '../helpers/child.js'
import { listLockFiles } from '../helpers/data-files.js'
import { request } from '../helpers/http.js'
import { holdRequest, tryRequest, waitFor } from '../helpers/ops.js'
import { JWT, NO_SECRET, stopWhileSecretIsWritten } from '../helpers/secret-signal.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

describe('NODE_ENV=production without JWT_SECRET or JWT_SECRETS', () => {
  it('refuses to start even when a development start left DATA_DIR/.jwt-secret', {
    timeout: 90_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'start-stop-'), 'data')
    const development = await startChild({ dataDir, env: NO_SECRET }, 60_000)
    t.after(() => development.stop('SIGKILL'))
    assert.equal((await development.stop()).code, 0)
    const file = path.join(dataDir, '.jwt-secret')
    const kept = await readFile(file, 'utf8')

    const production = spawnService({ dataDir, env: { ...NO_SECRET, NODE_ENV: 'production' } })
    t.after(() => {
      production.proc.kill('SIGKILL')
    })
    const { code } = await production.exited
    assert.equal(code, 1, production.stdout())
    assert.doesNotMatch(production.stdout(), /"msg":"listening"/)
    const lines = production.stderr().trimEnd().split('\n')
    assert.equal(lines.length, 1, production.stderr())
    assert.match(
      lines[0] ?? '',
      /^user-service: cannot start: JWT_SECRET \(or JWT_SECRETS\) must be set when NODE_ENV=production: set one of them \(.*\.jwt-secret, made by a development start, is never used in production\)$/,
    )
    assert.equal(await readFile(file, 'utf8'), kept)
    assert.deepEqual(listLockFiles(dataDir), [])
  })
})

describe('a first start that fails before it listens', () => {
  it('keeps no secret, so the next start that listens prints the token', {
    timeout: 90_000,
  }, async (t) => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    t.after(() => new Promise<void>((resolve) => taken.close(() => resolve())))
    const address = taken.address()
    assert.ok(address !== null && typeof address === 'object')
    const dataDir = path.join(await makeTempDir(t, 'start-stop-'), 'data')

    const refused = spawnService({ dataDir, env: { ...NO_SECRET, PORT: String(address.port) } })
    t.after(() => {
      refused.proc.kill('SIGKILL')
    })
    assert.equal((await refused.exited).code, 1, refused.stderr())
    assert.match(refused.stderr(), /PORT \d+ is in use/)
    assert.doesNotMatch(refused.stderr(), JWT)
    assert.deepEqual(
      (await readdir(dataDir)).filter(
        (name) => name.includes('jwt-secret') || name.startsWith('.lock'),
      ),
      [],
    )

    const good = await startChild({ dataDir, env: NO_SECRET }, 60_000)
    t.after(() => good.stop('SIGKILL'))
    await waitFor(
      'the first-start message',
      () => (/curl/.test(good.stderr()) ? true : undefined),
      30_000,
    )
    assert.match(good.stderr(), /a new random secret was written/)
    const token = JWT.exec(good.stderr())?.[0]
    assert.ok(token !== undefined, good.stderr())
    assert.equal((await request('GET', `${good.url}/users`, { token })).status, 200)
    assert.equal((await good.stop()).code, 0)
  })
})

describe('a stop signal while the start waits for its database', () => {
  it('ends the start with exit 0, keeping neither the lock nor a secret whose token it never printed', {
    timeout: 90_000,
  }, async (t) => {
    // A server that takes the connection and never answers: the start waits before it listens.
    const silent = createServer(() => undefined)
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    t.after(() => {
      silent.close()
    })
    const address = silent.address()
    assert.ok(address !== null && typeof address === 'object')
    const dataDir = path.join(await makeTempDir(t, 'start-stop-'), 'data')
    const child = spawnService({
      dataDir,
      env: { ...NO_SECRET, DATABASE_URL: `postgres://u@127.0.0.1:${address.port}/users` },
    })
    t.after(() => {
      child.proc.kill('SIGKILL')
    })
    await waitFor(
      'the lock and the first-start secret',
      async () => {
        const names = await readdir(dataDir).catch((): string[] => [])
        return names.includes('.jwt-secret') && listLockFiles(dataDir).length === 1
          ? true
          : undefined
      },
      30_000,
    )
    child.proc.kill('SIGTERM')
    assert.deepEqual(await child.exited, { code: 0, signal: null }, child.stderr())
    assert.deepEqual(listLockFiles(dataDir), [])
    assert.ok(!(await readdir(dataDir)).includes('.jwt-secret'), 'the next start prints a token')
    assert.doesNotMatch(child.stderr(), JWT)
    assert.match(child.stdout(), /"msg":"stopped before listening","signal":"SIGTERM"/)
  })
})

describe('a stop signal while the first start writes its secret', () => {
  it('stops with exit 0, leaving no temp file, and keeps the secret only if its token was printed', {
    timeout: 120_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'start-stop-'), 'data')
    await stopWhileSecretIsWritten(t, dataDir, (env) => {
      const child = spawnService({ dataDir, env })
      t.after(() => {
        child.proc.kill('SIGKILL')
      })
      return child
    })
  })
})

describe('a second SIGTERM while a single process stops', () => {
  it('exits 1 at once, cutting the request in flight, and gives the lock back', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'start-stop-'), 'data')
    const child = await startChild({
      dataDir,
      env: { MAX_INFLIGHT: '1', SHUTDOWN_TIMEOUT_MS: '3600000' },
    })
    t.after(() => child.stop('SIGKILL'))
    const held = holdRequest(child.url, {
      path: '/users',
      token: makeToken(),
      body: JSON.stringify({ email: uniqueEmail('second'), name: 'Second Signal' }),
    })
    t.after(() => {
      held.abort()
    })
    await waitFor(
      'the held request to be in flight',
      async () => {
        const res = await tryRequest('GET', `${child.url}/users`, { token: makeToken() })
        return 'status' in res && res.status === 503 ? true : undefined
      },
      10_000,
    )
    child.proc.kill('SIGTERM')
    await waitForOutput(child, '"msg":"shutting down"')
    assert.equal(listLockFiles(dataDir).length, 1, 'the first signal waits for the request')
    child.proc.kill('SIGTERM')
    const { code } = await child.exited
    assert.equal(code, 1, child.stderr())
    assert.deepEqual(listLockFiles(dataDir), [], 'the forced exit leaves no lock behind')
    await assert.rejects(held.response)
  })
})

describe('SIGHUP', () => {
  it('stops the service as SIGTERM does: exit 0 and the lock released', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'start-stop-'), 'data')
    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    assert.equal(listLockFiles(dataDir).length, 1)
    assert.deepEqual(await child.stop('SIGHUP'), { code: 0, signal: null })
    assert.deepEqual(listLockFiles(dataDir), [])
    assert.match(child.stdout(), /"msg":"stopped","signal":"SIGHUP"/)
  })
})

describe('NODE_ENV in another case than production', () => {
  it('is not production, and the start says so in a warn line', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'start-stop-'), 'data')
    const child = await startChild(
      { dataDir, env: { ...NO_SECRET, NODE_ENV: 'Production' } },
      60_000,
    )
    t.after(() => child.stop('SIGKILL'))
    await waitForOutput(child, '"msg":"NODE_ENV is not production')
    assert.match(child.stdout(), /"level":"warn".*"nodeEnv":"Production"/)
    // Not production: the first start wrote and used a secret of its own.
    await waitFor(
      'the first-start message',
      () => (/curl/.test(child.stderr()) ? true : undefined),
      30_000,
    )
    assert.equal((await child.stop()).code, 0)
  })
})
