import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'

import type { User } from '../../src/index.js'
import { createUserService, MemoryStore } from '../../src/index.js'
import { readCheckpoint } from '../../src/store/file/checkpoint-file.js'
import { PROJECT_ROOT, sleep } from '../helpers/child.js'
import { assertProblem, request, type UserPage } from '../helpers/http.js'
import { makeTempDir } from '../helpers/service.js'
import { makeToken, TEST_SECRET } from '../helpers/tokens.js'

const run = promisify(execFile)

function listen(server: Server): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo
      resolve(`http://127.0.0.1:${port}`)
    })
  })
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => {
      resolve()
    })
    server.closeAllConnections()
  })
}

/** Each option, given to createUserService, is a ConfigError whose message matches. */
function assertRefused(refused: readonly [Record<string, unknown>, RegExp][]): void {
  for (const [option, message] of refused) {
    assert.throws(
      () => createUserService({ store: new MemoryStore(), secret: TEST_SECRET, ...option }),
      (error: unknown) =>
        error instanceof Error && error.name === 'ConfigError' && message.test(error.message),
      JSON.stringify(option),
    )
  }
}

describe('embedding the service (the example of docs/embedding.md)', () => {
  it("serves /api/users from the handler mounted in a host app, next to the host app's own routes", async (t) => {
    // The example of docs/embedding.md, as written there.
    const users = createUserService({
      store: new MemoryStore(),
      secret: TEST_SECRET,
      basePath: '/api',
    })
    await users.open()

    const host = createServer((req, res) => {
      if (req.url?.startsWith('/api/')) return users.handler(req, res)
      res.end('the rest of my app')
    })
    const url = await listen(host)
    t.after(async () => {
      await closeServer(host)
      await users.close()
    })
    const token = makeToken()

    const created = await request('POST', `${url}/api/users`, {
      token,
      json: { email: 'ada@example.com', name: 'Ada Lovelace' },
    })
    assert.equal(created.status, 201, created.text)
    const user = created.json<User>()
    assert.equal(created.headers.get('location'), `/api/users/${user.id}`)
    assert.equal(user.email, 'ada@example.com')

    const read = await request('GET', `${url}/api/users/${user.id}`, { token })
    assert.equal(read.status, 200)
    assert.deepEqual(read.body, user)

    const list = await request('GET', `${url}/api/users`, { token })
    assert.equal(list.status, 200)
    assert.deepEqual(list.json<UserPage>(), { items: [user], nextCursor: null })

    assertProblem(await request('GET', `${url}/api/users`), 401, 'token_missing')

    const own = await request('GET', `${url}/`)
    assert.equal(own.status, 200)
    assert.equal(own.text, 'the rest of my app')
    const other = await request('GET', `${url}/users`, { token })
    assert.equal(other.text, 'the rest of my app', 'without the base path the host app answers')

    await closeServer(host)
    await users.close()
    const stored = await users.store.list({ filter: {}, order: 'asc', limit: 10 })
    assert.deepEqual(
      stored.items.map((record) => JSON.parse(record.json) as unknown),
      [user],
    )
  })

  it('answers 503 starting from the handler before open() is called', async (t) => {
    const users = createUserService({
      store: new MemoryStore(),
      secret: TEST_SECRET,
      basePath: '/api',
    })
    const host = createServer((req, res) => {
      users.handler(req, res)
    })
    const url = await listen(host)
    t.after(async () => {
      await closeServer(host)
      await users.close()
    })
    assertProblem(await request('GET', `${url}/api/users`, { token: makeToken() }), 503, 'starting')
    await users.open()
    assert.equal((await request('GET', `${url}/api/users`, { token: makeToken() })).status, 200)
  })
})

describe('the life of an embedded service', () => {
  it('survives a store that fails to load after listen(): open() rejects with the reason and /readyz stays 503', async (t) => {
    class FailingStore extends MemoryStore {
      override async open(): Promise<void> {
        throw new Error('the disk is gone')
      }
    }
    const users = createUserService({ store: new FailingStore(), secret: TEST_SECRET })
    t.after(() => users.close())
    const { url } = await users.listen(0)
    await assert.rejects(users.open(), /the disk is gone/)
    // An 'error' on the server with nobody listening would have ended this process by now.
    await sleep(50)
    const ready = await request('GET', `${url}/readyz`)
    assert.equal(ready.status, 503, ready.text)
  })

  it('close() during listen() leaves nothing listening and gives the data directory back; listen() after close() is refused', async (t) => {
    const dataDir = await makeTempDir(t)
    const first = createUserService({ dataDir, secret: TEST_SECRET })
    const listening = first.listen(0)
    await first.close()
    await listening
    assert.equal(first.server.listening, false)
    await assert.rejects(first.listen(0), /closed/)
    await assert.rejects(first.open(), /closed/)
    // The lock is free: another service takes the directory and loads it.
    const second = createUserService({ dataDir, secret: TEST_SECRET })
    t.after(() => second.close())
    const { url } = await second.listen(0)
    await second.open()
    const ready = await request('GET', `${url}/readyz`)
    assert.equal(ready.status, 200, ready.text)
  })
})

describe('the options of createUserService are checked as their variables are', () => {
  it('refuses a value its variable would refuse, naming the option', () => {
    const refused: [Record<string, unknown>, RegExp][] = [
      [{ maxInflight: 0 }, /^maxInflight must be between 1 and/],
      [{ idempotencyTtlS: 0 }, /^idempotencyTtlS must be between 1 and/],
      [{ leewaySeconds: -100 }, /^leewaySeconds must be a whole number/],
      [{ headersTimeoutMs: Number.NaN }, /^headersTimeoutMs must be a whole number/],
      [{ basePath: 'api' }, /^basePath must look like \/v1/],
      [{ basePath: '/..' }, /^basePath must not hold a \. or \.\. segment/],
      [{ basePath: '/api/./' }, /^basePath must not hold a \. or \.\. segment/],
      [
        { databaseUrl: 'mysql://x/db' },
        /^databaseUrl must be a postgres:\/\/ or postgresql:\/\/ URL/,
      ],
    ]
    assertRefused(refused)
  })

  it("refuses a value given in the option's own type that its variable would refuse", () => {
    const refused: [Record<string, unknown>, RegExp][] = [
      [
        { rateLimitAddress: { quota: 0, windowSeconds: 0 } },
        /^rateLimitAddress must be off or Q\/W/,
      ],
      [{ rateLimitSubject: { quota: 10, windowSeconds: -1 } }, /^rateLimitSubject must be off/],
      [{ trustedProxies: ['not-an-address'] }, /^trustedProxies: "not-an-address" is not/],
      [{ webhookAllowNetworks: ['nope'] }, /^webhookAllowNetworks: "nope" is not a CIDR block/],
      [{ webhookRetrySchedule: [] }, /^webhookRetrySchedule must list 1 to 20 delays/],
      [{ webhookRetrySchedule: [-5] }, /^webhookRetrySchedule: "-5ms" is not a delay/],
      [{ corsOrigins: ['not an origin'] }, /^corsOrigins: "not an origin" is not an origin/],
    ]
    assertRefused(refused)
  })

  it('serves with typed option values its variable would take', async (t) => {
    const users = createUserService({
      store: new MemoryStore(),
      secret: TEST_SECRET,
      rateLimitAddress: { quota: 2, windowSeconds: 60 },
      trustedProxies: ['10.0.0.0/8'],
      webhookRetrySchedule: [5_000, 60_000],
      corsOrigins: ['https://app.example.com'],
    })
    t.after(() => users.close())
    const { url } = await users.listen(0, '127.0.0.1')
    await users.open()
    const statuses: number[] = []
    for (let i = 0; i < 3; i += 1) statuses.push((await request('GET', `${url}/users`)).status)
    assert.deepEqual(statuses, [401, 401, 429])
  })

  it("takes basePath '/' as none and '/api/' as /api, as BASE_PATH does", async (t) => {
    for (const [basePath, target] of [
      ['/', '/users'],
      ['/api/', '/api/users'],
    ] as const) {
      const users = createUserService({ store: new MemoryStore(), secret: TEST_SECRET, basePath })
      t.after(() => users.close())
      const { url } = await users.listen(0)
      await users.open()
      const res = await request('GET', `${url}${target}`, { token: makeToken() })
      assert.equal(res.status, 200, `${basePath}: ${res.text}`)
    }
  })
})

describe('the store options of createUserService', () => {
  it('prunes events past eventsRetentionDays: an older cursor is 410 cursor_expired', async (t) => {
    let clock = Date.now()
    const users = createUserService({
      dataDir: await makeTempDir(t, 'embedding-retention-'),
      secret: TEST_SECRET,
      now: () => clock,
      eventsRetentionDays: 1,
    })
    const { url } = await users.listen(0, '127.0.0.1')
    t.after(() => users.close())
    await users.open()
    const create = async (email: string): Promise<User> => {
      const res = await request('POST', `${url}/users`, {
        token: makeToken({ nowS: Math.floor(clock / 1000) }),
        json: { email, name: 'Ada' },
      })
      assert.equal(res.status, 201, res.text)
      return res.json<User>()
    }
    await create('old@example.com')
    // Two days on: past the one day asked for, well within the default of 30.
    clock += 2 * 86_400_000
    const fresh = await create('fresh@example.com')
    const reader = makeToken({ scope: 'events:read', nowS: Math.floor(clock / 1000) })
    const fromStart = () =>
      request('GET', `${url}/events?after=${'0'.repeat(16)}`, { token: reader })
    // The store prunes in the background, about once a second.
    let expired = await fromStart()
    for (let i = 0; i < 50 && expired.status === 200; i += 1) {
      await sleep(100)
      expired = await fromStart()
    }
    assertProblem(expired, 410, 'cursor_expired')
    const page = await request('GET', `${url}/events`, { token: reader })
    assert.equal(page.status, 200, page.text)
    assert.deepEqual(
      page.json<{ items: { userId: string }[] }>().items.map((event) => event.userId),
      [fresh.id],
    )
  })

  it("gives checkpointMs to the file store: no checkpoint before the interval's end", async (t) => {
    const dataDir = await makeTempDir(t, 'embedding-checkpoint-')
    const users = createUserService({ dataDir, secret: TEST_SECRET, checkpointMs: 3_600_000 })
    const { url } = await users.listen(0, '127.0.0.1')
    t.after(() => users.close())
    await users.open()
    const res = await request('POST', `${url}/users`, {
      token: makeToken(),
      json: { email: 'ada@example.com', name: 'Ada' },
    })
    assert.equal(res.status, 201, res.text)
    // The default interval (1 s) would have moved the checkpoint past the create by now.
    await sleep(1500)
    assert.equal(readCheckpoint(dataDir), 0)
  })
})

describe('the package entry (src/index.ts)', () => {
  it('has no side effects on import: it leaves nothing running, and a process that imports it exits by itself', async () => {
    // A timer, socket, server, watcher or file read started on import shows here by its kind;
    // the child's own stdio pipes are all a clean import leaves behind.
    const script = [
      "import('./src/index.ts').then((m) => setImmediate(() => console.log(JSON.stringify({",
      '  entry: typeof m.createUserService,',
      "  running: process.getActiveResourcesInfo().filter((kind) => kind !== 'PipeWrap' && kind !== 'TTYWrap'),",
      '}))))',
    ].join('\n')
    // Resolving at all means the process exited with 0 by itself; the time-out only ends a hang.
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '-e', script], {
      cwd: PROJECT_ROOT,
      timeout: 60_000,
    })
    assert.deepEqual(JSON.parse(stdout) as unknown, { entry: 'function', running: [] })
  })

  it('exports the service, both stores and the error table', async () => {
    const entry = await import('../../src/index.js')
    for (const name of [
      'createUserService',
      'MemoryStore',
      'FileStore',
      'createOpenApiDocument',
      'signToken',
      'createJsonLogger',
      'flushOnExit',
    ]) {
      assert.equal(typeof (entry as Record<string, unknown>)[name], 'function', name)
    }
    assert.equal(typeof entry.ERROR_CODES, 'object')
    assert.ok(Array.isArray(entry.ROUTES))
  })

  it('exports ConfigError, the class of what a refused option throws (docs/embedding.md)', async () => {
    const entry = (await import('../../src/index.js')) as Record<string, unknown>
    const ConfigError = entry['ConfigError']
    assert.equal(typeof ConfigError, 'function', 'ConfigError is exported')
    assert.throws(
      () => createUserService({ store: new MemoryStore(), secret: TEST_SECRET, maxInflight: 0 }),
      (error: unknown) => error instanceof (ConfigError as new () => Error),
    )
  })
})
