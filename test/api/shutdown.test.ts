import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { readdir } from 'node:fs/promises'
import { connect } from 'node:net'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/users/user.js'
import { startChild, type RunningChild } from '../helpers/child.js'
import { listLockFiles } from '../helpers/data-files.js'
import { assertProblem, type TestResponse } from '../helpers/http.js'
import { CountingStore, holdRequest, tryRequest, waitFor, type HeldRequest } from '../helpers/ops.js'
import { makeTempDir, startService, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/** A child with MAX_INFLIGHT=1, so that a held request shows itself by turning others away. */
async function startLimitedChild(t: TestContext, env: Record<string, string> = {}): Promise<{ child: RunningChild, dataDir: string }> {
  const dataDir = path.join(await makeTempDir(t), 'data')
  const child = await startChild({ dataDir, env: { MAX_INFLIGHT: '1', ...env } })
  t.after(() => child.stop('SIGKILL'))
  return { child, dataDir }
}

async function holdInChild(t: TestContext, child: RunningChild, email: string): Promise<HeldRequest> {
  const held = holdRequest(child.url, { path: '/users', token: makeToken(), body: JSON.stringify({ email, name: 'Slow Writer' }) })
  t.after(() => { held.abort() })
  await waitFor('the held request to be in flight', async () => {
    const res = await tryRequest('GET', `${child.url}/users`, { token: makeToken() })
    return 'status' in res && res.status === 503 ? true : undefined
  })
  return held
}

/** A new request during shutdown: refused at the socket, or answered 503 shutting_down. */
function isTurnedAway(res: TestResponse | { error: string }): boolean {
  if ('error' in res) return true
  return res.status === 503 && res.json<{ code?: string }>().code === 'shutting_down'
}

/** Resolves with the exit, or fails after `ms`. */
async function exitWithin(child: RunningChild, ms: number): Promise<{ code: number | null, signal: NodeJS.Signals | null }> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => { reject(new Error(`the process did not exit within ${ms} ms:\n${child.stderr()}`)) }, ms)
  })
  try {
    return await Promise.race([child.exited, late])
  } finally {
    clearTimeout(timer)
  }
}

describe('SIGTERM', () => {
  it('finishes the request in flight with its 201, turns new ones away, releases the lock and exits 0', async (t) => {
    const { child, dataDir } = await startLimitedChild(t)
    assert.equal(listLockFiles(dataDir).length, 1, 'a running service holds a DATA_DIR/.lock.<n>')
    const email = uniqueEmail('slow')
    const held = await holdInChild(t, child, email)

    child.proc.kill('SIGTERM')
    await waitFor('new requests to be turned away', async () => {
      const res = await tryRequest('GET', `${child.url}/users`, { token: makeToken() })
      return isTurnedAway(res) ? true : undefined
    })
    assert.equal(child.proc.exitCode, null, 'the process waits for the request in flight')

    held.finish()
    const res = await held.response
    assert.equal(res.status, 201, res.text)
    const user = JSON.parse(res.text) as User
    assert.equal(user.email, email)

    const { code } = await exitWithin(child, 5000)
    assert.equal(code, 0, child.stderr())
    assert.deepEqual(listLockFiles(dataDir), [], 'the lock file is removed')
    assert.deepEqual(await readdir(path.join(dataDir, 'users')), [`${user.id}.json`])
    assert.match(child.stdout(), /"msg":"stopped"/)
  })

  it('cuts a request held forever after SHUTDOWN_TIMEOUT_MS and still exits 0', async (t) => {
    const { child, dataDir } = await startLimitedChild(t, { SHUTDOWN_TIMEOUT_MS: '500' })
    const held = await holdInChild(t, child, uniqueEmail('forever'))
    const started = Date.now()
    child.proc.kill('SIGTERM')
    const { code } = await exitWithin(child, 5000)
    const elapsed = Date.now() - started
    assert.equal(code, 0, child.stderr())
    assert.ok(elapsed >= 400, `exited after ${elapsed} ms, before the shutdown time-out`)
    assert.ok(elapsed < 3000, `exited after ${elapsed} ms`)
    await assert.rejects(held.response)
    assert.deepEqual(listLockFiles(dataDir), [])
    assert.deepEqual(await readdir(path.join(dataDir, 'users')), [])
  })

  it('is not delayed by an idle keep-alive connection', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    const socket = connect(Number(new URL(child.url).port), '127.0.0.1')
    t.after(() => { socket.destroy() })
    let received = ''
    socket.setEncoding('utf8').on('data', (chunk: string) => { received += chunk })
    socket.on('error', () => undefined)
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n')
    await waitFor('the answer', () => (received.includes('"status":"ok"') ? true : undefined))
    const started = Date.now()
    child.proc.kill('SIGTERM')
    const { code } = await exitWithin(child, 5000)
    assert.equal(code, 0, child.stderr())
    assert.ok(Date.now() - started < 2000, `exited after ${Date.now() - started} ms`)
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
  it('lets the request in flight finish and turns later ones away', async (t) => {
    const store = new CountingStore()
    const s = await startService(t, { store })
    const email = uniqueEmail('closing')
    const held = holdRequest(s.baseUrl, {
      path: '/users', token: makeToken({ sub: randomUUID() }), body: JSON.stringify({ email, name: 'In Flight' }),
    })
    t.after(() => { held.abort() })
    await waitFor('the held request to be in flight', () => (store.calls > 0 ? true : undefined))

    let closed = false
    const closing = s.service.close().then(() => { closed = true })
    const later = await tryRequest('GET', `${s.baseUrl}/users`, { token: s.token })
    assert.ok(isTurnedAway(later), `a request after close() was served: ${JSON.stringify(later)}`)
    if ('status' in later) assertProblem(later, 503, 'shutting_down')
    assert.equal(closed, false, 'close() waits for the request in flight')

    held.finish()
    const res = await held.response
    assert.equal(res.status, 201, res.text)
    assert.equal((JSON.parse(res.text) as User).email, email)
    await closing
    assert.equal(closed, true)
    const stored = await store.list({ filter: {}, order: 'asc', limit: 10 })
    assert.deepEqual(stored.items.map((record) => record.user.email), [email])
  })

  it('answers a request begun before close() with 503 shutting_down and Connection: close', async (t) => {
    const s = await startService(t, { shutdownTimeoutMs: 300 })
    const held = holdRequest(s.baseUrl, {
      path: '/users', token: makeToken(), body: JSON.stringify({ email: uniqueEmail(), name: 'Held' }),
    })
    t.after(() => { held.abort() })
    const socket = connect(Number(new URL(s.url).port), '127.0.0.1')
    t.after(() => { socket.destroy() })
    socket.on('error', () => undefined)
    await new Promise<void>((resolve) => { socket.once('connect', () => { resolve() }) })
    // A request begun before close() keeps its connection from counting as idle.
    socket.write('GET /users HTTP/1.1\r\n')
    await waitFor('the server to see both connections', async () => {
      const count = await new Promise<number>((resolve) => {
        s.service.server.getConnections((_error, n) => { resolve(n) })
      })
      return count >= 2 ? true : undefined
    })
    const closing = s.service.close()
    let received = ''
    socket.setEncoding('utf8').on('data', (chunk: string) => { received += chunk })
    socket.write(`Host: x\r\nAuthorization: Bearer ${s.token}\r\n\r\n`)
    await waitFor('the answer', () => (received.includes('\r\n\r\n') ? true : undefined), 2000)
    assert.match(received, /^HTTP\/1\.1 503 /)
    assert.match(received, /\r\nconnection: close\r\n/i)
    assert.match(received, /\r\nretry-after: \d+\r\n/i)
    assert.match(received, /"code":"shutting_down"/)
    await closing
    await assert.rejects(held.response)
  })

  it('cuts a request held past shutdownTimeoutMs and resolves', async (t) => {
    const s = await startService(t, { shutdownTimeoutMs: 200 })
    const held = holdRequest(s.baseUrl, {
      path: '/users', token: makeToken(), body: JSON.stringify({ email: uniqueEmail(), name: 'Forever' }),
    })
    t.after(() => { held.abort() })
    await waitFor('the held request to reach the server', async () => {
      const count = await new Promise<number>((resolve) => {
        s.service.server.getConnections((_error, n) => { resolve(n) })
      })
      return count >= 1 ? true : undefined
    })
    const started = Date.now()
    await s.service.close()
    const elapsed = Date.now() - started
    assert.ok(elapsed >= 150 && elapsed < 2000, `close() took ${elapsed} ms`)
    await assert.rejects(held.response)
    assert.deepEqual(listLockFiles(s.dataDir), [])
  })
})
