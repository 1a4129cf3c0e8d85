import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { mkdtemp } from 'node:fs/promises'
import { type AddressInfo, connect, createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'

import { HttpError } from '../../src/http/problem.js'
import { FileStore } from '../../src/store/file/file-store.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import { type RunningChild, startChild } from '../helpers/child.js'
import { FaultyStore } from '../helpers/faulty-store.js'
import { assertProblem, request, type TestResponse } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../helpers/postgres.js'
import { makeTempDir, startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { remountReadOnly } from '../helpers/tmpfs-world.js'
import { makeToken } from '../helpers/tokens.js'

type LogLine = Record<string, unknown>

const errorLines = (app: TestService): LogLine[] =>
  app.logs.filter((line) => line['level'] === 'error')

const rename = (
  app: TestService,
  id: string,
  name: string,
  requestId: string,
): Promise<TestResponse> =>
  app.call('PATCH', `/users/${id}`, { json: { name }, headers: { 'x-request-id': requestId } })

const create = (app: TestService, requestId: string): Promise<TestResponse> =>
  app.call('POST', '/users', {
    json: { email: uniqueEmail('fault'), name: 'Storage Fault' },
    headers: { 'x-request-id': requestId },
  })

/** A storage_unavailable as the PostgreSQL store makes it: the driver's error as its cause. */
function databaseFault(cause: Error): HttpError {
  return new HttpError(
    'storage_unavailable',
    'The database did not answer or refused the request, so nothing was changed. Try again later.',
    {
      headers: { 'retry-after': '5' },
      cause,
    },
  )
}

describe('storage faults in the log', () => {
  it('logs the first fault of an episode at error with its errno, syscall, operation and requestId, and the next ones of the episode not at error (file store)', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    // The directory watch would turn the store read-only for good on seeing users/ replaced:
    // looking rarely leaves the episode's end to the writes, as on a disk that fills and empties.
    const app = await startService(t, {
      dataDir,
      store: new FileStore({ dataDir, watchIntervalMs: 3_600_000 }),
    })
    const kept = await app.createUser({ name: 'Kept' })
    const usersDir = path.join(dataDir, 'users')
    const replaceUsersDir = (): void => {
      renameSync(usersDir, `${usersDir}.away`)
      writeFileSync(usersDir, 'not a directory')
    }
    const restoreUsersDir = (): void => {
      rmSync(usersDir)
      renameSync(`${usersDir}.away`, usersDir)
    }

    replaceUsersDir()
    assertProblem(await create(app, 'fault-first'), 503, 'storage_unavailable')
    assertProblem(
      await rename(app, kept.id, 'Never Written', 'fault-second'),
      503,
      'storage_unavailable',
    )
    assert.equal(errorLines(app).length, 1, JSON.stringify(errorLines(app)))
    const [first] = errorLines(app)
    assert.deepEqual(Object.keys(first ?? {}).sort(), [
      'errno',
      'level',
      'msg',
      'operation',
      'path',
      'requestId',
      'step',
      'syscall',
    ])
    assert.equal(first?.['msg'], 'storage fault')
    assert.equal(first?.['requestId'], 'fault-first')
    assert.equal(first?.['operation'], 'createUser')
    assert.equal(first?.['errno'], 'ENOTDIR')
    assert.equal(first?.['syscall'], 'open')
    assert.equal(first?.['step'], 'write')
    assert.match(
      String(first?.['path']),
      /\/users\/\.[0-9a-f-]{36}\.json\.[0-9a-f]{12}[0-9a-z]+\.tmp$/,
    )
    // The second fault is kept for LOG_LEVEL=debug only.
    const again = app.logs.filter((line) => line['msg'] === 'storage fault again')
    assert.deepEqual(
      again.map((line) => [
        line['level'],
        line['requestId'],
        line['operation'],
        line['errno'],
        line['faults'],
      ]),
      [['debug', 'fault-second', 'updateUser', 'ENOTDIR', 2]],
    )

    // A write that reaches the disk again ends the episode; the next fault opens another.
    restoreUsersDir()
    assert.equal((await rename(app, kept.id, 'Written Again', 'works-again')).status, 200)
    assert.deepEqual(
      app.logs
        .filter((line) => line['msg'] === 'storage works again')
        .map((line) => [line['level'], line['faults']]),
      [['info', 2]],
    )
    replaceUsersDir()
    assertProblem(
      await rename(app, kept.id, 'Never Written Either', 'fault-third'),
      503,
      'storage_unavailable',
    )
    assert.deepEqual(
      errorLines(app).map((line) => [line['requestId'], line['operation'], line['errno']]),
      [
        ['fault-first', 'createUser', 'ENOTDIR'],
        ['fault-third', 'updateUser', 'ENOTDIR'],
      ],
    )
    restoreUsersDir()
    assert.deepEqual(
      (await app.snapshot()).map((user) => [user.id, user.name]),
      [[kept.id, 'Written Again']],
    )
  })

  it('writes one error line to stdout for a read-only mount (EROFS), however many writes it refuses', {
    timeout: 60_000,
  }, async (t) => {
    const root = await mkdtemp(path.join(tmpdir(), 'fault-log-'))
    const mount = path.join(root, 'mnt')
    let child: RunningChild | undefined
    // One hook, in this order: the child stops before the mount goes, the mount before the directory.
    t.after(async () => {
      await child?.stop('SIGKILL')
      try {
        execFileSync('umount', ['-l', mount], { stdio: 'ignore' })
      } catch {
        // Never mounted.
      }
      rmSync(root, { recursive: true, force: true })
    })
    mkdirSync(mount)
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', mount], {
        stdio: 'pipe',
      })
    } catch (error) {
      return t.skip(
        `mounting a tmpfs is not allowed here (${String((error as { stderr?: Buffer }).stderr ?? error).trim()})`,
      )
    }
    child = await startChild({ dataDir: path.join(mount, 'data') })
    const { url } = child
    const token = makeToken()
    const post = (requestId: string): Promise<TestResponse> =>
      request('POST', `${url}/users`, {
        token,
        json: { email: uniqueEmail('erofs'), name: 'Read Only' },
        headers: { 'x-request-id': requestId },
      })
    assert.equal((await post('before')).status, 201)
    await remountReadOnly(mount)
    for (const requestId of ['erofs-1', 'erofs-2', 'erofs-3'])
      assertProblem(await post(requestId), 503, 'storage_unavailable')
    const lines = await waitFor('the log line of the last request', () => {
      const parsed = (child?.stdout() ?? '')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as LogLine)
      return parsed.some((line) => line['msg'] === 'request' && line['requestId'] === 'erofs-3')
        ? parsed
        : undefined
    })
    const faults = lines.filter((line) => line['msg'] === 'storage fault')
    assert.deepEqual(
      faults.map((line) => [line['level'], line['requestId'], line['operation'], line['errno']]),
      [['error', 'erofs-1', 'createUser', 'EROFS']],
      child.stdout(),
    )
    assert.equal(typeof faults[0]?.['syscall'], 'string')
    assert.match(String(faults[0]?.['time']), /^\d{4}-\d{2}-\d{2}T/)
  })

  it('logs a database fault with its SQLSTATE or errno and never its message, and an import line with its line number', async (t) => {
    const store = new FaultyStore()
    const app = await startService(t, { store })
    const user = await app.createUser({ name: 'Before' })
    const secret = 'Key (email)=(someone@example.com) quoted by the database'
    store.fail('update', {
      error: databaseFault(Object.assign(new Error(secret), { code: '57P01', severity: 'FATAL' })),
    })
    assertProblem(await rename(app, user.id, 'Lost', 'db-first'), 503, 'storage_unavailable')
    assertProblem(await rename(app, user.id, 'Lost Again', 'db-second'), 503, 'storage_unavailable')
    assert.deepEqual(errorLines(app), [
      {
        level: 'error',
        msg: 'storage fault',
        requestId: 'db-first',
        operation: 'updateUser',
        sqlstate: '57P01',
      },
    ])
    assert.ok(
      !JSON.stringify(app.logs).includes('someone@example.com'),
      "the database's message is never logged",
    )

    store.heal('update')
    assert.equal((await rename(app, user.id, 'After', 'db-works')).status, 200)
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
      code: 'ECONNREFUSED',
      errno: -111,
      syscall: 'connect',
    })
    store.fail('create', { error: databaseFault(refused) })
    const line = JSON.stringify({ email: uniqueEmail('import'), name: 'Import Fault' })
    const imported = await fetch(`${app.baseUrl}/users:import`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${app.token}`,
        'content-type': 'application/x-ndjson',
        'x-request-id': 'import-fault',
      },
      body: `${line}\n${line.replace('import', 'other')}\n`,
    })
    assert.equal(imported.status, 200)
    assert.deepEqual(
      (await imported.text())
        .split('\n')
        .filter((text) => text !== '')
        .map((text) => (JSON.parse(text) as { status: number }).status),
      [503, 503],
    )
    assert.deepEqual(errorLines(app).slice(1), [
      {
        level: 'error',
        msg: 'storage fault',
        requestId: 'import-fault',
        operation: 'importUsers',
        line: 1,
        errno: 'ECONNREFUSED',
        syscall: 'connect',
      },
    ])
    assert.deepEqual(
      (await app.snapshot()).map((stored) => stored.name),
      ['After'],
    )
  })

  it('logs PostgreSQL going away once, with the errno and the requestId, and its return at info', {
    skip: SKIP_POSTGRES,
    timeout: 30_000,
  }, async (t) => {
    // The store reaches the database through a proxy the test can cut: a database that stops
    // answering, without ending a backend under a query in flight.
    const proxy = await startProxy(new URL(requireDatabaseUrl()))
    t.after(() => proxy.close())
    const url = new URL(requireDatabaseUrl())
    url.port = String(proxy.port)
    const app = await startService(t, {
      store: new PostgresStore({ url: url.toString(), schema: freshSchema(t) }),
    })
    const user = await app.createUser({ name: 'Before' })

    await proxy.cut()
    assertProblem(
      await rename(app, user.id, 'Never Written', 'pg-first'),
      503,
      'storage_unavailable',
    )
    assertProblem(await create(app, 'pg-second'), 503, 'storage_unavailable')
    const faults = app.logs.filter((line) => line['msg'] === 'storage fault')
    assert.deepEqual(
      faults.map((line) => [
        line['level'],
        line['requestId'],
        line['operation'],
        line['errno'],
        line['syscall'],
      ]),
      [['error', 'pg-first', 'updateUser', 'ECONNREFUSED', 'connect']],
      JSON.stringify(app.logs),
    )

    await proxy.resume()
    const after = await waitFor(
      'a write to succeed again',
      async () => {
        const res = await rename(app, user.id, 'After', 'pg-back')
        return res.status === 200 ? res : undefined
      },
      10_000,
    )
    assert.equal(after.status, 200)
    assert.equal(app.logs.filter((line) => line['msg'] === 'storage works again').length, 1)
    assert.deepEqual(
      (await app.snapshot()).map((stored) => stored.name),
      ['After'],
    )
  })
})

interface Proxy {
  readonly port: number
  /** Refuses new connections and ends the open ones. */
  cut(): Promise<void>
  /** Takes connections again on the same port. */
  resume(): Promise<void>
  close(): Promise<void>
}

/** A TCP proxy to `target` on a port of its own. */
async function startProxy(target: URL): Promise<Proxy> {
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname)
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('error', () => undefined)
      socket.once('close', () => {
        sockets.delete(socket)
      })
    }
    client.pipe(upstream).pipe(client)
  })
  const listen = (port: number): Promise<void> =>
    new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject)
        resolve()
      })
    })
  const stop = (): Promise<void> =>
    new Promise((resolve) => {
      if (!server.listening) {
        resolve()
        return
      }
      server.close(() => {
        resolve()
      })
      for (const socket of sockets) socket.destroy()
    })
  await listen(0)
  const port = (server.address() as AddressInfo).port
  return { port, cut: stop, resume: () => listen(port), close: stop }
}
