import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import path from 'node:path'
import { describe, it } from 'node:test'

import { startChild } from '../helpers/child.js'
import type { Problem } from '../helpers/http.js'
import { tryRequest, waitFor } from '../helpers/ops.js'
import {
  type Exchange,
  exchange,
  openSocket,
  parseRawResponse,
  waitForClose,
} from '../helpers/raw-exchange.js'
import { makeTempDir, startService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { assertUnchangedBy } from '../helpers/users-suite.js'

// Node checks time-outs every 30 s by default; the contract wants about a second of their value.
// Waiting 12 s tells the two apart with room to spare on a busy machine.
const WAIT_MS = 12_000
const NOT_LATER_THAN_MS = 8000

/** Writes `head` at once, then one byte of `drip` every 200 ms (and `drip` again), forever. */
function trickle(head: string, drip = 'a'): (socket: Socket) => () => void {
  return (socket) => {
    socket.write(head)
    const timer = setInterval(() => {
      if (socket.writable) socket.write(drip)
    }, 200)
    return () => {
      clearInterval(timer)
    }
  }
}

/** Asserts the 408 request_timeout problem+json, Connection: close, and the close that follows. */
function assertTimedOut(result: Exchange, limitMs: number): void {
  assert.ok(result.closed, `the connection was still open after ${result.elapsedMs} ms`)
  assert.ok(
    result.elapsedMs < NOT_LATER_THAN_MS,
    `closed after ${result.elapsedMs} ms for a ${limitMs} ms limit`,
  )
  // Never early: the limit is the client's to use.
  assert.ok(
    result.elapsedMs >= limitMs * 0.9,
    `closed after ${result.elapsedMs} ms for a ${limitMs} ms limit`,
  )
  const res = result.response
  assert.ok(res !== undefined, `no 408 before the close: ${JSON.stringify(result.raw)}`)
  assert.equal(res.status, 408, result.raw)
  assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/)
  assert.equal(res.headers.get('connection'), 'close')
  const problem = res.body as Problem
  assert.equal(problem.code, 'request_timeout', res.text)
  assert.equal(problem.status, 408)
  assert.equal(problem.requestId, res.headers.get('x-request-id'))
}

describe('the headers time-out', () => {
  it('answers headers sent one byte every 200 ms with 408 request_timeout after about headersTimeoutMs, not 30 s', async (t) => {
    const s = await startService(t, { headersTimeoutMs: 1000 })
    const result = await exchange(s.url, undefined, {
      waitMs: WAIT_MS,
      drive: trickle('GET /users HTTP/1.1\r\nHost: x\r\nX-Slow: '),
    })
    assertTimedOut(result, 1000)
    assert.equal((await s.call('GET', '/users')).status, 200, 'the service still answers')
  })

  it('holds for the service as a process, configured by HEADERS_TIMEOUT_MS', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const child = await startChild({ dataDir, env: { HEADERS_TIMEOUT_MS: '1000' } })
    t.after(() => child.stop('SIGKILL'))
    const result = await exchange(child.url, undefined, {
      waitMs: WAIT_MS,
      drive: trickle('GET /users HTTP/1.1\r\nHost: x\r\nX-Slow: '),
    })
    assertTimedOut(result, 1000)
  })
})

/** The head of a POST /users whose 100-byte body the test then sends slowly, if at all. */
function slowCreateHead(token: string, ...fields: string[]): string {
  return [
    'POST /users HTTP/1.1',
    'Host: x',
    `Authorization: Bearer ${token}`,
    'Content-Type: application/json',
    'Content-Length: 100',
    ...fields,
    '',
    '',
  ].join('\r\n')
}

describe('the request time-out', () => {
  it('answers a body sent one byte every 200 ms with 408 after about requestTimeoutMs and stores nothing', async (t) => {
    const s = await startService(t, { headersTimeoutMs: 1000, requestTimeoutMs: 2000 })
    const head = slowCreateHead(s.token, 'X-Request-Id: slow-body-1')
    const result = await assertUnchangedBy(s, () =>
      exchange(s.url, undefined, { waitMs: WAIT_MS, drive: trickle(`${head}{"name":"`, 'n') }),
    )
    assertTimedOut(result, 2000)
    // The request's head was read: the 408 is its own answer, under its own id, and its log line
    // says 408 (not 499, as for a client that went away), at info, never as a 5xx.
    assert.equal(result.response?.headers.get('x-request-id'), 'slow-body-1')
    const line = await waitFor(
      'the request line of the timed-out POST',
      () => s.logs.find((entry) => entry['msg'] === 'request' && entry['method'] === 'POST'),
      5000,
    )
    assert.equal(line['level'], 'info')
    assert.equal(line['status'], 408, JSON.stringify(line))
    assert.equal(line['requestId'], 'slow-body-1')
    assert.deepEqual(
      s.logs.filter((entry) => entry['level'] === 'error'),
      [],
    )
  })

  // Node's connection check swaps the two limits when the headers' is the longer, so a body that
  // stalled was cut only at HEADERS_TIMEOUT_MS (10 s by default), not at REQUEST_TIMEOUT_MS.
  it('holds requestTimeoutMs when it is shorter than the default headersTimeoutMs', async (t) => {
    const s = await startService(t, { requestTimeoutMs: 2000 })
    const head = slowCreateHead(s.token)
    const result = await assertUnchangedBy(s, () =>
      exchange(s.url, undefined, { waitMs: WAIT_MS, drive: trickle(`${head}{"name":"`, 'n') }),
    )
    assertTimedOut(result, 2000)
    // The headers, part of the whole request, are held to the shorter limit too.
    const slowHead = await exchange(s.url, undefined, {
      waitMs: WAIT_MS,
      drive: trickle('GET /users HTTP/1.1\r\nHost: x\r\nX-Slow: '),
    })
    assertTimedOut(slowHead, 2000)
  })

  // The connection closes in stages after the 408 and reads on meanwhile: the rest of the body,
  // sent as soon as the 408 arrived, must not be run (the client was told its request was not).
  it('runs nothing of a body whose rest arrives after its 408', async (t) => {
    const s = await startService(t, { headersTimeoutMs: 1000, requestTimeoutMs: 2000 })
    const body = JSON.stringify({ email: 'late@example.com', name: 'Late' })
    const head = [
      'POST /users HTTP/1.1',
      'Host: x',
      `Authorization: Bearer ${s.token}`,
      'Content-Type: application/json',
      `Content-Length: ${body.length}`,
      '',
      '',
    ].join('\r\n')
    const result = await assertUnchangedBy(s, async () => {
      const exchanged = await exchange(s.url, `${head}${body.slice(0, 5)}`, {
        waitMs: WAIT_MS,
        drive: (socket) => {
          socket.once('data', () => {
            socket.write(body.slice(5))
          })
          return () => undefined
        },
      })
      // Time for the rest to be read and, were it run, stored.
      await new Promise((resolve) => setTimeout(resolve, 500))
      return exchanged
    })
    assertTimedOut(result, 2000)
    assert.deepEqual((await s.call('GET', '/users?q=late')).body, { items: [], nextCursor: null })
    assert.deepEqual(
      s.logs.filter((entry) => entry['level'] === 'error'),
      [],
    )
  })
})

describe('MAX_CONNECTIONS', () => {
  /** One GET on an open connection; the answer's status. */
  function askOn(socket: Socket, target: string): Promise<number> {
    return new Promise((resolve, reject) => {
      let received = ''
      const onData = (chunk: Buffer): void => {
        received += chunk.toString('latin1')
        const res = parseRawResponse(received)
        if (res === undefined) return
        socket.off('data', onData)
        resolve(res.status)
      }
      socket.on('data', onData)
      socket.once('close', () => {
        reject(new Error(`closed before an answer: ${received}`))
      })
      socket.write(`GET ${target} HTTP/1.1\r\nHost: x\r\n\r\n`)
    })
  }

  it('closes the connections above maxConnections at once, serves the others, and serves again afterwards', async (t) => {
    const s = await startService(t, { maxConnections: 5 })
    // No fetch before this point: its pooled keep-alive connections would count too.
    const kept: Socket[] = []
    for (let i = 0; i < 5; i += 1) kept.push(await openSocket(s.url))
    t.after(() => {
      for (const socket of kept) socket.destroy()
    })
    const { hostname, port } = new URL(s.url)
    const extra = Array.from({ length: 5 }, () => connect(Number(port), hostname))
    t.after(() => {
      for (const socket of extra) socket.destroy()
    })
    const closed = await Promise.all(extra.map((socket) => waitForClose(socket, 3000)))
    assert.deepEqual(
      closed,
      [true, true, true, true, true],
      'every connection above the limit is closed',
    )

    for (const socket of kept) {
      assert.ok(!socket.destroyed, 'a connection within the limit stays open')
      assert.equal(await askOn(socket, '/healthz'), 200)
    }
    for (const socket of kept) socket.destroy()
    await waitFor(
      'a new connection to be served',
      async () => {
        const res = await tryRequest('GET', `${s.url}/users`, { token: makeToken() })
        return 'status' in res && res.status === 200 ? true : undefined
      },
      5000,
    )
  })
})
