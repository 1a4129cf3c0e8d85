import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { connect, createServer, type Socket } from 'node:net'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { spawnService, startChild } from '../helpers/child.js'
import { listLockFiles } from '../helpers/data-files.js'
import { request } from '../helpers/http.js'
import { holdRequest, waitFor } from '../helpers/ops.js'
import { freshDatabase, SKIP_POSTGRES } from '../helpers/postgres.js'
import { stopWhileSecretIsWritten } from '../helpers/secret-signal.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/** SIGKILLs a detached child's whole process group, if it is still there. */
function killGroup(group: number | undefined): void {
  if (group === undefined) return
  try {
    process.kill(-group, 'SIGKILL')
  } catch {
    // The group is gone.
  }
}

/** The status of a GET on a connection of its own: node:cluster hands each to the next worker. */
function statusOnNewConnection(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest(
      url,
      { agent: false, headers: { authorization: `Bearer ${makeToken()}` } },
      (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      },
    )
    req.on('error', () => resolve(0))
    req.end()
  })
}

describe('WORKERS=2 stopped by a signal to the whole process group', {
  skip: SKIP_POSTGRES,
}, () => {
  it('lets the request in flight finish with its 201, then exits 0', {
    timeout: 90_000,
  }, async (t) => {
    const url = await freshDatabase(t)
    const dataDir = path.join(await makeTempDir(t, 'cluster-stop-'), 'data')
    // A process group of its own, as systemd or a terminal gives the service.
    const primary = await startChild(
      {
        dataDir,
        detached: true,
        env: {
          DATABASE_URL: url,
          WORKERS: '2',
          MAX_INFLIGHT: '1',
          SHUTDOWN_TIMEOUT_MS: '3600000',
        },
      },
      30_000,
    )
    const group = primary.proc.pid
    assert.ok(group !== undefined)
    t.after(() => killGroup(group))
    await waitFor(
      'both workers to listen',
      () => (primary.stdout().match(/"msg":"listening"/g)?.length === 2 ? true : undefined),
      20_000,
    )
    const email = uniqueEmail('group')
    const held = holdRequest(primary.url, {
      path: '/users',
      token: makeToken(),
      body: JSON.stringify({ email, name: 'Group Stop' }),
    })
    t.after(() => {
      held.abort()
    })
    // With MAX_INFLIGHT=1, the worker holding the request turns others away: new connections
    // reach both workers in turn.
    await waitFor(
      'the held request to be in flight',
      async () =>
        (await statusOnNewConnection(`${primary.url}/users`)) === 503 ? true : undefined,
      10_000,
    )
    process.kill(-group, 'SIGTERM')
    await waitFor(
      'the primary to pass the signal on',
      () => (/"msg":"shutting down the workers"/.test(primary.stdout()) ? true : undefined),
      10_000,
    )
    await waitFor(
      'both workers to be stopping',
      () => (primary.stdout().match(/"msg":"shutting down"/g)?.length === 2 ? true : undefined),
      10_000,
    )
    // The primary passes the signal on as soon as it has its own, and a worker that had not yet
    // taken the group's would see the two as one: here the second arrives after the first, as a
    // worker busy for a moment sees it.
    const workers = [...primary.stdout().matchAll(/"msg":"listening".*?"pid":(\d+)/g)].map(
      (match) => Number(match[1]),
    )
    assert.equal(workers.length, 2, primary.stdout())
    for (const pid of workers) {
      try {
        process.kill(pid, 'SIGTERM')
      } catch (error) {
        // The worker without a request in flight may have stopped already.
        assert.equal((error as NodeJS.ErrnoException).code, 'ESRCH')
      }
    }
    held.finish()
    const res = await held.response
    assert.equal(res.status, 201, res.text)
    assert.equal((JSON.parse(res.text) as User).email, email)
    assert.deepEqual(await primary.exited, { code: 0, signal: null })
    assert.deepEqual(listLockFiles(dataDir), [])
  })
})

describe('a DATABASE_URL whose server refuses us', { skip: SKIP_POSTGRES }, () => {
  it('refuses to start in one line naming DATABASE_URL, where it points and what the server said', async (t) => {
    const url = new URL(await freshDatabase(t))
    url.pathname = '/nosuchdb'
    url.password = 'hunter2-secret'
    const dataDir = path.join(await makeTempDir(t, 'cluster-stop-'), 'data')
    const child = spawnService({ dataDir, env: { DATABASE_URL: url.toString() } })
    t.after(() => {
      child.proc.kill('SIGKILL')
    })
    assert.equal((await child.exited).code, 1, child.stderr())
    assert.doesNotMatch(child.stdout(), /"msg":"listening"/)
    const lines = child.stderr().trimEnd().split('\n')
    assert.equal(lines.length, 1, child.stderr())
    assert.equal(
      lines[0],
      `user-service: cannot start: DATABASE_URL (${url.hostname}:${url.port}/nosuchdb) cannot be used: database "nosuchdb" does not exist`,
    )
    assert.deepEqual(listLockFiles(dataDir), [])
  })
})

describe('WORKERS=2 on a first start without a secret', { skip: SKIP_POSTGRES }, () => {
  const NO_SECRET = { JWT_SECRET: undefined, JWT_SECRETS: undefined, NODE_ENV: 'development' }
  const JWT = /eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/g

  it('prints the token once, when every worker listens', { timeout: 90_000 }, async (t) => {
    const url = await freshDatabase(t)
    const dataDir = path.join(await makeTempDir(t, 'cluster-start-'), 'data')
    const env = { ...NO_SECRET, DATABASE_URL: url, WORKERS: '2' }
    const primary = await startChild({ dataDir, env }, 30_000)
    t.after(() => primary.stop('SIGKILL'))
    await waitFor(
      'the first-start message',
      () => (/curl/.test(primary.stderr()) ? true : undefined),
      20_000,
    )
    const tokens = primary.stderr().match(JWT) ?? []
    assert.equal(new Set(tokens).size, 1, primary.stderr())
    const res = await request('GET', `${primary.url}/users`, { token: tokens[0] })
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(await primary.stop(), { code: 0, signal: null })
  })

  it('keeps no secret when no worker could listen', { timeout: 90_000 }, async (t) => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    t.after(() => new Promise<void>((resolve) => taken.close(() => resolve())))
    const address = taken.address()
    assert.ok(address !== null && typeof address === 'object')
    const url = await freshDatabase(t)
    const dataDir = path.join(await makeTempDir(t, 'cluster-start-'), 'data')
    const env = { ...NO_SECRET, DATABASE_URL: url, WORKERS: '2', PORT: String(address.port) }
    const primary = spawnService({ dataDir, env })
    t.after(() => {
      primary.proc.kill('SIGKILL')
    })
    assert.equal((await primary.exited).code, 1, primary.stdout())
    assert.equal(existsSync(path.join(dataDir, '.jwt-secret')), false)
    assert.deepEqual(listLockFiles(dataDir), [])
  })

  it('stops with exit 0 on a signal while the primary writes the secret, leaving no temp file', {
    timeout: 120_000,
  }, async (t) => {
    const url = await freshDatabase(t)
    const dataDir = path.join(await makeTempDir(t, 'cluster-start-'), 'data')
    await stopWhileSecretIsWritten(t, dataDir, (env) => {
      const primary = spawnService({
        dataDir,
        env: { ...env, DATABASE_URL: url, WORKERS: '2' },
        detached: true,
      })
      t.after(() => killGroup(primary.proc.pid))
      return primary
    })
  })
})

/** A TCP proxy to host:port that can be cut (every connection closed, new ones refused). */
async function cuttableProxy(
  target: URL,
): Promise<{ port: number; cut(on: boolean): void; close(): void }> {
  let cut = false
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    if (cut) {
      client.destroy()
      return
    }
    const upstream = connect(Number(target.port), target.hostname)
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('error', () => undefined)
      socket.on('close', () => {
        sockets.delete(socket)
        client.destroy()
        upstream.destroy()
      })
    }
    client.pipe(upstream).pipe(client)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  assert.ok(address !== null && typeof address === 'object')
  return {
    port: address.port,
    cut(on) {
      cut = on
      if (on) for (const socket of sockets) socket.destroy()
    },
    close() {
      for (const socket of sockets) socket.destroy()
      server.close()
    },
  }
}

describe('WORKERS=2 when a worker dies while the database is away', { skip: SKIP_POSTGRES }, () => {
  it('keeps serving with the other worker and starts a new one once the database is back', {
    timeout: 120_000,
  }, async (t) => {
    const direct = new URL(await freshDatabase(t))
    const proxy = await cuttableProxy(direct)
    t.after(() => proxy.close())
    const url = new URL(direct.href)
    url.host = `127.0.0.1:${proxy.port}`
    const dataDir = path.join(await makeTempDir(t, 'cluster-restart-'), 'data')
    const primary = await startChild(
      { dataDir, env: { DATABASE_URL: url.href, WORKERS: '2' } },
      30_000,
    )
    t.after(() => primary.stop('SIGKILL'))
    const pids = (): number[] =>
      [...primary.stdout().matchAll(/"msg":"listening".*"pid":(\d+)/g)].map((m) => Number(m[1]))
    await waitFor('both workers', () => (pids().length === 2 ? true : undefined), 30_000)
    proxy.cut(true)
    process.kill(pids()[0] ?? 0, 'SIGKILL')
    await waitFor(
      'a new worker that cannot start',
      () => (/"msg":"a worker could not start/.test(primary.stdout()) ? true : undefined),
      30_000,
    )
    // Past the first retry too: the service is still up, its other worker still answers.
    await new Promise((resolve) => setTimeout(resolve, 3000))
    assert.equal(primary.proc.exitCode, null, primary.stdout())
    assert.equal(await statusOnNewConnection(`${primary.url}/healthz`), 200)
    proxy.cut(false)
    await waitFor(
      'a third worker listening',
      () => (pids().length === 3 ? true : undefined),
      60_000,
    )
    for (let i = 0; i < 4; i += 1) {
      assert.equal(await statusOnNewConnection(`${primary.url}/users`), 200)
    }
    assert.deepEqual(await primary.stop(), { code: 0, signal: null })
  })
})
