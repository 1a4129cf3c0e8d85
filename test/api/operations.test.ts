import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { readdir, rm, writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import path from 'node:path'
import { describe, it } from 'node:test'

import { createUserService } from '../../src/process/create-user-service.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { sleep } from '../helpers/child.js'
import { assertProblem, request, type TestResponse } from '../helpers/http.js'
import { blockEventLoop, CountingStore, GatedStore, holdRequest, waitFor } from '../helpers/ops.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { makeToken, TEST_SECRET } from '../helpers/tokens.js'

function assertRetryAfter(res: TestResponse): void {
  assert.match(
    res.headers.get('retry-after') ?? '',
    /^\d+$/,
    `Retry-After on ${res.status}: ${res.text}`,
  )
}

async function assertHealthy(url: string): Promise<void> {
  const res = await request('GET', `${url}/healthz`)
  assert.equal(res.status, 200)
  assert.equal(res.headers.get('cache-control'), 'no-store')
}

async function userFiles(s: TestService): Promise<string[]> {
  return (await readdir(path.join(s.dataDir, 'users')))
    .filter((name) => name.endsWith('.json'))
    .sort()
}

describe('GET /readyz', () => {
  it('returns 200 with Cache-Control: no-store once the service is ready', async (t) => {
    const s = await startService(t)
    const res = await request('GET', `${s.url}/readyz`)
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('cache-control'), 'no-store')
    assert.deepEqual(res.body, { status: 'ready' })
  })
})

describe('while the store is loading', () => {
  it('answers 503 starting on /readyz and /users, 200 on /healthz, then 200 once loaded', async (t) => {
    const store = new GatedStore()
    const service = createUserService({ store, secret: TEST_SECRET })
    t.after(async () => {
      store.release()
      await service.close()
    })
    const { url } = await service.listen(0, '127.0.0.1')
    const token = makeToken()

    const ready = await request('GET', `${url}/readyz`)
    assertProblem(ready, 503, 'starting')
    assertRetryAfter(ready)
    assert.equal(ready.headers.get('cache-control'), 'no-store')
    const users = await request('GET', `${url}/users`, { token })
    assertProblem(users, 503, 'starting')
    assertRetryAfter(users)
    const create = await request('POST', `${url}/users`, {
      token,
      json: { email: uniqueEmail(), name: 'Early' },
    })
    assertProblem(create, 503, 'starting')
    await assertHealthy(url)

    store.release()
    await service.open()
    assert.equal((await request('GET', `${url}/readyz`)).status, 200)
    const list = await request('GET', `${url}/users`, { token })
    assert.equal(list.status, 200)
    assert.deepEqual(list.body, { items: [], nextCursor: null })
  })
})

describe('maintenance (DATA_DIR/maintenance)', () => {
  it('answers 503 maintenance on /users while the file exists, and 200 again once it is gone', async (t) => {
    const s = await startService(t)
    const existing = await s.createUser()
    const before = await s.snapshot()
    const filesBefore = await userFiles(s)
    const marker = path.join(s.dataDir, 'maintenance')
    await writeFile(marker, '')
    t.after(() => rm(marker, { force: true }))

    // The file is looked at once a second; the clock here is only a generous upper bound.
    const first = await waitFor(
      'maintenance',
      async () => {
        const res = await s.call('GET', '/users')
        return res.status === 503 ? res : undefined
      },
      5000,
    )
    assertProblem(first, 503, 'maintenance')
    assertRetryAfter(first)
    assert.equal(first.headers.get('cache-control'), 'no-store')

    const read = await s.call('GET', `/users/${existing.id}`)
    assertProblem(read, 503, 'maintenance')
    const ready = await request('GET', `${s.url}/readyz`)
    assertProblem(ready, 503, 'maintenance')
    assertRetryAfter(ready)
    await assertHealthy(s.url)

    // Route faults answer before the 503; the 503 answers before the token check.
    assertProblem(await s.call('GET', '/no-such-route'), 404, 'not_found')
    assertProblem(await s.call('GET', `/users/${existing.id}:frobnicate`), 404, 'not_found')
    const wrongMethod = await s.call('DELETE', '/users')
    assertProblem(wrongMethod, 405, 'method_not_allowed')
    assert.ok(wrongMethod.headers.get('allow'))
    assertProblem(await s.call('GET', '/users', { token: undefined }), 503, 'maintenance')
    assertProblem(await request('GET', `${s.baseUrl}/users`), 503, 'maintenance')
    assertProblem(await s.call('GET', '/users', { token: 'not.a.token' }), 503, 'maintenance')

    // Nothing changes during maintenance.
    const create = await s.call('POST', '/users', {
      json: { email: uniqueEmail(), name: 'During Maintenance' },
    })
    assertProblem(create, 503, 'maintenance')
    assertRetryAfter(create)
    assertProblem(await s.call('DELETE', `/users/${existing.id}`), 503, 'maintenance')
    assertProblem(
      await s.call('PATCH', `/users/${existing.id}`, { json: { name: 'Changed' } }),
      503,
      'maintenance',
    )
    assertProblem(await s.call('POST', `/users/${existing.id}:activate`), 503, 'maintenance')
    assert.deepEqual(await userFiles(s), filesBefore)

    await rm(marker)
    await waitFor(
      'the end of maintenance',
      async () => {
        const res = await s.call('GET', '/users')
        return res.status === 200 ? true : undefined
      },
      5000,
    )
    assert.equal((await request('GET', `${s.url}/readyz`)).status, 200)
    assert.deepEqual(await s.snapshot(), before)
  })
})

describe('overload: requests in flight past MAX_INFLIGHT', () => {
  it('refuses /users with 503 overloaded while the limit is reached, without token check or storage', async (t) => {
    const store = new CountingStore()
    const s = await startService(t, { store, maxInflight: 1 })
    const email = uniqueEmail('held')
    // A canonical-UUID sub makes the held request read the store, which shows it is in flight.
    const held = holdRequest(s.baseUrl, {
      path: '/users',
      token: makeToken({ sub: randomUUID() }),
      body: JSON.stringify({ email, name: 'Held' }),
    })
    t.after(() => {
      held.abort()
    })
    await waitFor('the held request to be in flight', () => (store.calls > 0 ? true : undefined))
    store.calls = 0

    const list = await s.call('GET', '/users')
    assertProblem(list, 503, 'overloaded')
    assertRetryAfter(list)
    assert.equal(list.headers.get('cache-control'), 'no-store')
    const badToken = await s.call('GET', '/users', { token: 'not.a.token' })
    assertProblem(badToken, 503, 'overloaded')
    assertProblem(await s.call('GET', '/users', { token: undefined }), 503, 'overloaded')
    const create = await s.call('POST', '/users', {
      json: { email: uniqueEmail(), name: 'Refused' },
    })
    assertProblem(create, 503, 'overloaded')
    assertProblem(await s.call('GET', `/users/${randomUUID()}`), 503, 'overloaded')
    await assertHealthy(s.url)
    assert.equal(store.calls, 0, 'a refused request must not reach the store')

    held.finish()
    const done = await held.response
    assert.equal(done.status, 201, done.text)
    const after = await s.call('GET', '/users')
    assert.equal(after.status, 200)
    assert.deepEqual(
      after.json<{ items: { email: string }[] }>().items.map((user) => user.email),
      [email],
    )
  })

  it('answers /readyz 503 while a new /users request would be refused', async (t) => {
    const store = new CountingStore()
    const s = await startService(t, { store, maxInflight: 1 })
    const held = holdRequest(s.baseUrl, {
      path: '/users',
      token: makeToken({ sub: randomUUID() }),
      body: JSON.stringify({ email: uniqueEmail(), name: 'Held' }),
    })
    t.after(() => {
      held.abort()
    })
    await waitFor('the held request to be in flight', () => (store.calls > 0 ? true : undefined))
    assertProblem(await s.call('GET', '/users'), 503, 'overloaded')
    const ready = await request('GET', `${s.url}/readyz`)
    held.finish()
    assert.equal((await held.response).status, 201)
    assertProblem(ready, 503, 'overloaded')
  })

  it('serves again as soon as the held request is cut by its client', async (t) => {
    const store = new CountingStore()
    const s = await startService(t, { store, maxInflight: 1 })
    const held = holdRequest(s.baseUrl, {
      path: '/users',
      token: makeToken({ sub: randomUUID() }),
      body: JSON.stringify({ email: uniqueEmail(), name: 'Cut' }),
    })
    await waitFor('the held request to be in flight', () => (store.calls > 0 ? true : undefined))
    assertProblem(await s.call('GET', '/users'), 503, 'overloaded')
    held.abort()
    // The client's own abort, before any answer: Node's socket hang up.
    await assert.rejects(held.response, { code: 'ECONNRESET', message: 'socket hang up' })
    await waitFor('the slot to be free', async () =>
      (await s.call('GET', '/users')).status === 200 ? true : undefined,
    )
    assert.deepEqual(await s.snapshot(), [])
  })
})

describe('overload: event-loop delay past MAX_EVENT_LOOP_DELAY_MS', () => {
  it('answers 503 overloaded on /users and /readyz after the loop was blocked, then recovers', async (t) => {
    // A limit no idle loop reaches by chance, and a block far past it.
    const s = await startService(t, { store: new MemoryStore(), maxEventLoopDelayMs: 250 })
    assert.equal((await s.call('GET', '/users')).status, 200)
    // The delay monitor measures from its first tick (every 20 ms): let it start before blocking.
    await sleep(100)
    // The refusal lasts until the next check, a second later: /users and /readyz are asked for
    // together while it lasts, and /healthz is answered all the same. On a machine so busy that
    // the window passes before both are answered, the loop is blocked again (five times at most).
    let overloaded: TestResponse[] | undefined
    for (let block = 0; block < 5 && overloaded === undefined; block += 1) {
      blockEventLoop(1000)
      overloaded = await waitFor(
        'overloaded',
        async () => {
          const answers = await Promise.all([
            s.call('GET', '/users'),
            request('GET', `${s.url}/readyz`),
            request('GET', `${s.url}/healthz`),
          ])
          return answers[0]?.status === 503 && answers[1]?.status === 503 ? answers : undefined
        },
        3_000,
        20,
      ).catch(() => undefined)
    }
    const [refused, ready, health] = overloaded ?? []
    assert.ok(
      refused !== undefined && ready !== undefined && health !== undefined,
      'never overloaded',
    )
    assert.equal(health.status, 200, 'healthz is answered while overloaded')
    assert.equal(health.headers.get('cache-control'), 'no-store')
    assertProblem(refused, 503, 'overloaded')
    assertRetryAfter(refused)
    assertProblem(ready, 503, 'overloaded')
    assertRetryAfter(ready)
    await waitFor(
      'recovery',
      async () => ((await s.call('GET', '/users')).status === 200 ? true : undefined),
      10_000,
      50,
    )
    assert.equal((await request('GET', `${s.url}/readyz`)).status, 200)
  })
})

describe('server time-outs', () => {
  it('passes the default time-outs to the server: 10 s for headers, 30 s per request, 5 s keep-alive', () => {
    const service = createUserService({ store: new MemoryStore(), secret: TEST_SECRET })
    assert.equal(service.server.headersTimeout, 10_000)
    assert.equal(service.server.requestTimeout, 30_000)
    assert.equal(service.server.keepAliveTimeout, 5_000)
  })

  it('passes the configured time-outs to the server', () => {
    const service = createUserService({
      store: new MemoryStore(),
      secret: TEST_SECRET,
      headersTimeoutMs: 1_000,
      requestTimeoutMs: 2_000,
      keepAliveTimeoutMs: 3_000,
    })
    assert.equal(service.server.headersTimeout, 1_000)
    assert.equal(service.server.requestTimeout, 2_000)
    assert.equal(service.server.keepAliveTimeout, 3_000)
  })

  it('closes an idle keep-alive connection after keepAliveTimeoutMs, long before the 5 s default', async (t) => {
    const s = await startService(t, { store: new MemoryStore(), keepAliveTimeoutMs: 300 })
    const socket = connect(Number(new URL(s.url).port), '127.0.0.1')
    t.after(() => {
      socket.destroy()
    })
    let received = ''
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      received += chunk
    })
    const closed = new Promise<number>((resolve) => {
      socket.on('close', () => {
        resolve(Date.now())
      })
    })
    const started = Date.now()
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
    await waitFor(
      'the answer',
      () => (received.includes('"status":"ok"') ? true : undefined),
      10_000,
    )
    assert.match(received, /^HTTP\/1\.1 200/)
    assert.doesNotMatch(
      received,
      /\r\nconnection: close\r\n/i,
      'the answer keeps the connection open',
    )
    // A clock below the 5 s default: a server that ignored the option would not close in time.
    const closedAt = await Promise.race([
      closed,
      new Promise<number>((resolve) =>
        setTimeout(() => {
          resolve(-1)
        }, 4000),
      ),
    ])
    assert.notEqual(closedAt, -1, 'the idle connection should be closed by the server within 4 s')
    // Closed by its time-out, not at once (half of it, as timers may fire a few ms early).
    assert.ok(closedAt - started >= 150, `closed ${closedAt - started} ms after the request`)
  })
})
