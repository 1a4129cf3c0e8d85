import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { readdir } from 'node:fs/promises'
import { connect } from 'node:net'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { type RunningChild, startChild } from '../helpers/child.js'
import { listLockFiles } from '../helpers/data-files.js'
import { assertProblem, request } from '../helpers/http.js'
import {
  CountingStore,
  type HeldRequest,
  holdRequest,
  tryRequest,
  waitFor,
} from '../helpers/ops.js'
import { makeTempDir, startService, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/** A child with MAX_INFLIGHT=1, so that a held request shows itself by turning others away. */
async function startLimitedChild(
  t: TestContext,
  env: Record<string, string> = {},
): Promise<{ child: RunningChild; dataDir: string }> {
  const dataDir = path.join(await makeTempDir(t), 'data')
  const child = await startChild({ dataDir, env: { MAX_INFLIGHT: '1', ...env } })
  t.after(() => child.stop('SIGKILL'))
  return { child, dataDir }
}

/** Waits until a GET /users is refused 503 overloaded: with a limit of one, the held request is in flight. */
async function waitUntilHeld(baseUrl: string): Promise<void> {
  await waitFor(
    'the held request to be in flight',
    async () => {
      const res = await tryRequest('GET', `${baseUrl}/users`, { token: makeToken() })
      if (!('status' in res) || res.status !== 503) return undefined
      assertProblem(res, 503, 'overloaded')
      return true
    },
    10_000,
  )
}

async function holdInChild(
  t: TestContext,
  child: RunningChild,
  email: string,
): Promise<HeldRequest> {
  const held = holdRequest(child.url, {
    path: '/users',
    token: makeToken(),
    body: JSON.stringify({ email, name: 'Slow Writer' }),
  })
  t.after(() => {
    held.abort()
  })
  await waitUntilHeld(child.url)
  return held
}

/** Resolves with the error code of a new connection to `url`: ECONNREFUSED once nothing listens, or 'connected'. */
function tryConnect(url: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(Number(new URL(url).port), '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve('connected')
    })
    socket.once('error', (error: NodeJS.ErrnoException) => {
      resolve(error.code ?? error.message)
    })
  })
}

/** Waits until the server no longer accepts connections. */
async function waitUntilNotListening(url: string): Promise<void> {
  await waitFor(
    'the server to stop accepting connections',
    async () => {
      const outcome = await tryConnect(url)
      // A connection queued just as the listener closes is reset: look again until one is refused.
      if (outcome === 'connected' || outcome === 'ECONNRESET') return undefined
      assert.equal(outcome, 'ECONNREFUSED')
      return true
    },
    10_000,
  )
}

function isRunning(child: RunningChild): boolean {
  return child.proc.exitCode === null && child.proc.signalCode === null
}

/** Resolves with the exit, or fails after `ms`: a clock far longer than the exit should take. */
async function exitWithin(
  child: RunningChild,
  ms: number,
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return within(
    child.exited,
    ms,
    () => `the process did not exit within ${ms} ms:\n${child.stderr()}`,
  )
}

async function within<T>(promise: Promise<T>, ms: number, message: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      reject(new Error(message()))
    }, ms)
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/** Records the order in which the named promises settle. */
function recordOrder(events: Record<string, Promise<unknown>>): string[] {
  const order: string[] = []
  for (const [name, promise] of Object.entries(events)) {
    promise.then(
      () => {
        order.push(name)
      },
      () => {
        order.push(name)
      },
    )
  }
  return order
}

describe('SIGTERM', () => {
  it('finishes the request in flight with its 201, turns new ones away, releases the lock and exits 0', async (t) => {
    // A shutdown time-out no test run reaches: only the finished request can let the process go.
    const { child, dataDir } = await startLimitedChild(t, { SHUTDOWN_TIMEOUT_MS: '3600000' })
    assert.equal(listLockFiles(dataDir).length, 1, 'a running service holds a DATA_DIR/.lock.<n>')
    const email = uniqueEmail('slow')
    const held = await holdInChild(t, child, email)

    child.proc.kill('SIGTERM')
    await waitUntilNotListening(child.url)
    await waitFor(
      'the shutting-down log line',
      () => (/"msg":"shutting down"/.test(child.stdout()) ? true : undefined),
      10_000,
    )
    assert.ok(isRunning(child), 'the process waits for the request in flight')
    assert.equal(listLockFiles(dataDir).length, 1, 'the lock is held while a request is in flight')

    const order = recordOrder({ response: held.response, exit: child.exited })
    held.finish()
    const res = await held.response
    assert.equal(res.status, 201, res.text)
    const user = JSON.parse(res.text) as User
    assert.equal(user.email, email)

    const { code } = await exitWithin(child, 20_000)
    assert.equal(code, 0, child.stderr())
    assert.deepEqual(order, ['response', 'exit'])
    assert.deepEqual(listLockFiles(dataDir), [], 'the lock file is removed')
    assert.deepEqual(await readdir(path.join(dataDir, 'users')), [`${user.id}.json`])
    assert.match(child.stdout(), /"msg":"stopped"/)
  })

  it('cuts a request held forever once SHUTDOWN_TIMEOUT_MS has passed, and still exits 0', async (t) => {
    const { child, dataDir } = await startLimitedChild(t, { SHUTDOWN_TIMEOUT_MS: '1000' })
    const held = await holdInChild(t, child, uniqueEmail('forever'))
    const signalled = Date.now()
    child.proc.kill('SIGTERM')
    // The default time-out is 10 s: an exit within this clock shows the configured one was used.
    const { code } = await exitWithin(child, 8000)
    const waited = Date.now() - signalled
    assert.equal(code, 0, child.stderr())
    // The process cannot have let go before its own clock, started after this one, passed 1000 ms.
    assert.ok(waited >= 1000, `exited ${waited} ms after SIGTERM, before the shutdown time-out`)
    // Cut by the server before any answer: the socket closes under the waiting request.
    await assert.rejects(held.response, { code: 'ECONNRESET', message: 'socket hang up' })
    assert.deepEqual(listLockFiles(dataDir), [])
    assert.deepEqual(await readdir(path.join(dataDir, 'users')), [])
    assert.match(child.stdout(), /"msg":"stopped"/)
  })

  it('is not held up by an idle keep-alive connection', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    // Both time-outs far past the clock below: only closing the idle connection lets the exit happen.
    const child = await startChild({
      dataDir,
      env: { KEEP_ALIVE_TIMEOUT_MS: '3600000', SHUTDOWN_TIMEOUT_MS: '3600000' },
    })
    t.after(() => child.stop('SIGKILL'))
    const socket = connect(Number(new URL(child.url).port), '127.0.0.1')
    t.after(() => {
      socket.destroy()
    })
    let received = ''
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      received += chunk
    })
    socket.on('error', () => undefined)
    const socketClosed = new Promise<void>((resolve) => {
      socket.once('close', () => {
        resolve()
      })
    })
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n')
    await waitFor(
      'the answer',
      () => (received.includes('"status":"ok"') ? true : undefined),
      10_000,
    )
    assert.doesNotMatch(received, /\r\nconnection: close\r\n/i, 'the connection is kept alive')
    child.proc.kill('SIGTERM')
    const { code } = await exitWithin(child, 15_000)
    assert.equal(code, 0, child.stderr())
    await socketClosed
  })
})

describe('SIGINT', () => {
  it('stops the service the same way: exit 0 and the lock released', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    assert.equal(listLockFiles(dataDir).length, 1)
    child.proc.kill('SIGINT')
    const { code } = await exitWithin(child, 5000)
    assert.equal(code, 0, child.stderr())
    assert.deepEqual(listLockFiles(dataDir), [])
  })
})

describe('service.close()', () => {
  it('lets the request in flight finish and stops accepting connections', async (t) => {
    const store = new CountingStore()
    const s = await startService(t, { store, shutdownTimeoutMs: 3_600_000 })
    const email = uniqueEmail('closing')
    const held = holdRequest(s.baseUrl, {
      path: '/users',
      token: makeToken({ sub: randomUUID() }),
      body: JSON.stringify({ email, name: 'In Flight' }),
    })
    t.after(() => {
      held.abort()
    })
    await waitFor(
      'the held request to be in flight',
      () => (store.calls > 0 ? true : undefined),
      10_000,
    )

    let closed = false
    const closing = s.service.close().then(() => {
      closed = true
    })
    assert.equal(
      await tryConnect(s.url),
      'ECONNREFUSED',
      'a new connection after close() is refused',
    )
    assert.equal(closed, false, 'close() waits for the request in flight')

    held.finish()
    const res = await held.response
    assert.equal(res.status, 201, res.text)
    assert.equal((JSON.parse(res.text) as User).email, email)
    await closing
    assert.equal(closed, true)
    const stored = await store.list({ filter: {}, order: 'asc', limit: 10 })
    assert.deepEqual(
      stored.items.map((record) => record.user.email),
      [email],
    )
  })

  it('answers a request begun before close() with 503 shutting_down and Connection: close', async (t) => {
    const s = await startService(t, { maxInflight: 1, shutdownTimeoutMs: 3_600_000 })
    const email = uniqueEmail('held')
    const held = holdRequest(s.baseUrl, {
      path: '/users',
      token: makeToken(),
      body: JSON.stringify({ email, name: 'Held' }),
    })
    t.after(() => {
      held.abort()
    })
    // The held request keeps close() waiting, so that the request below can still be answered.
    await waitUntilHeld(s.baseUrl)
    const socket = connect(Number(new URL(s.url).port), '127.0.0.1')
    t.after(() => {
      socket.destroy()
    })
    socket.on('error', () => undefined)
    let received = ''
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      received += chunk
    })
    // One write: a whole request, then the first line of the next. The answer to the first shows
    // that the server has read the second line too, so the connection is busy, not idle.
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /users HTTP/1.1\r\n')
    await waitFor(
      'the health answer',
      () => (received.includes('"status":"ok"') ? true : undefined),
      10_000,
    )
    const healthEnd = received.length
    const closing = s.service.close()
    socket.write(`Host: x\r\nAuthorization: Bearer ${s.token}\r\n\r\n`)
    await waitFor(
      'the second answer',
      () => (received.slice(healthEnd).includes('"code"') ? true : undefined),
      10_000,
    )
    const second = received.slice(healthEnd)
    assert.match(second, /^HTTP\/1\.1 503 /)
    assert.match(second, /\r\nconnection: close\r\n/i)
    assert.match(second, /\r\nretry-after: \d+\r\n/i)
    assert.match(second, /"code":"shutting_down"/)
    held.finish()
    const res = await held.response
    assert.equal(res.status, 201, res.text)
    await closing
    assert.deepEqual(await readdir(path.join(s.dataDir, 'users')), [
      `${(JSON.parse(res.text) as User).id}.json`,
    ])
  })

  it('answers a stream request whose first page was being read when close() began with 503 shutting_down and Retry-After', async (t) => {
    const store = new MemoryStore()
    const s = await startService(t, { store })
    await s.createUser()
    // The stream's first page is held until close() has begun.
    const read = store.events.read.bind(store.events)
    let release = (): void => undefined
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    let reading = (): void => undefined
    const reached = new Promise<void>((resolve) => {
      reading = resolve
    })
    store.events.read = async (query) => {
      reading()
      await held
      return read(query)
    }
    const stream = request('GET', `${s.baseUrl}/events`, {
      token: makeToken({ scope: 'events:read' }),
      headers: { accept: 'text/event-stream' },
    })
    await reached
    const closing = s.service.close()
    release()
    const res = await stream
    assertProblem(res, 503, 'shutting_down')
    assert.match(res.headers.get('retry-after') ?? '', /^[0-9]+$/)
    await closing
  })

  it('cuts a request held past shutdownTimeoutMs, then resolves', async (t) => {
    const s = await startService(t, { maxInflight: 1, shutdownTimeoutMs: 1000 })
    const held = holdRequest(s.baseUrl, {
      path: '/users',
      token: makeToken(),
      body: JSON.stringify({ email: uniqueEmail(), name: 'Forever' }),
    })
    t.after(() => {
      held.abort()
    })
    await waitUntilHeld(s.baseUrl)
    const started = Date.now()
    // The default is 10 s: resolving within this clock shows that the option was used.
    await within(s.service.close(), 8000, () => 'close() did not resolve within 8000 ms')
    const waited = Date.now() - started
    assert.ok(waited >= 1000, `close() resolved after ${waited} ms, before shutdownTimeoutMs`)
    // Cut by the server before any answer: the socket closes under the waiting request.
    await assert.rejects(held.response, { code: 'ECONNRESET', message: 'socket hang up' })
    assert.deepEqual(listLockFiles(s.dataDir), [])
    assert.deepEqual(await readdir(path.join(s.dataDir, 'users')), [])
  })
})
