// npm test: alone (it bounds wall-clock times, which another file run beside it would stretch).
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'

import { ALLOW_NONE, createAllowList } from '../../src/webhooks/address-policy.js'
import {
  type AttemptOptions,
  BODY_KEPT_BYTES,
  createEndpointAgent,
  sendAttempt,
} from '../../src/webhooks/attempt.js'
import { eventually, startRawServer, startReceiver } from '../helpers/webhook-receivers.js'

const LOOPBACK = createAllowList(['127.0.0.0/8'])
const BODY = Buffer.from('{"type":"user.created","timestamp":"2026-11-22T10:00:00.000Z","data":{}}')
const HEADERS = {
  'webhook-id': 'msg_000000000000002a',
  'webhook-timestamp': '1800000000',
  'webhook-signature': 'v1,abc=',
}

function attempt(url: string, options: Partial<AttemptOptions> = {}) {
  return sendAttempt(
    { url, headers: HEADERS, body: BODY },
    { allow: LOOPBACK, timeoutMs: 2000, ...options },
  )
}

describe('sendAttempt: what is sent', () => {
  it('POSTs the body as JSON with the webhook headers to the URL, path and query as given', async (t) => {
    const receiver = await startReceiver((_, res) => res.writeHead(200).end('ok'))
    t.after(() => receiver.close())
    const outcome = await attempt(`${receiver.url}/hooks/users?source=user-service&a=%20b`)
    assert.deepEqual(
      { ...outcome, durationMs: 0 },
      { result: 'succeeded', responseStatus: 200, error: null, response: 'ok', durationMs: 0 },
    )
    const [request] = receiver.received
    assert.ok(request !== undefined)
    assert.equal(request.method, 'POST')
    assert.equal(request.path, '/hooks/users?source=user-service&a=%20b')
    assert.equal(request.headers['content-type'], 'application/json')
    assert.equal(request.headers['content-length'], String(BODY.length))
    assert.equal(request.headers['webhook-id'], HEADERS['webhook-id'])
    assert.equal(request.headers['webhook-timestamp'], HEADERS['webhook-timestamp'])
    assert.equal(request.headers['webhook-signature'], HEADERS['webhook-signature'])
    assert.equal(request.headers.cookie, undefined)
    assert.equal(request.headers.authorization, undefined)
    assert.deepEqual(request.body, BODY)
  })

  it('succeeds on every 2xx', async (t) => {
    let status = 200
    const receiver = await startReceiver((_, res) => res.writeHead(status).end())
    t.after(() => receiver.close())
    for (status of [200, 201, 202, 204, 299]) {
      const outcome = await attempt(receiver.url)
      assert.equal(outcome.result, 'succeeded', String(status))
      assert.equal(outcome.responseStatus, status)
      assert.equal(outcome.error, null)
    }
  })
})

describe('sendAttempt: answers that fail it', () => {
  it('fails a non-2xx status with error status, keeping the body', async (t) => {
    let status = 500
    const receiver = await startReceiver((_, res) =>
      res.writeHead(status).end('{"error":"db down"}'),
    )
    t.after(() => receiver.close())
    for (status of [500, 400, 404, 410, 300, 418, 429, 503]) {
      const outcome = await attempt(receiver.url)
      assert.equal(outcome.result, 'failed', String(status))
      assert.equal(outcome.responseStatus, status)
      assert.equal(outcome.error, 'status')
      assert.equal(outcome.response, '{"error":"db down"}')
      assert.equal(outcome.retryAfterSeconds, undefined)
    }
  })

  it('never follows a redirect: a 3xx fails, and its Location gets nothing', async (t) => {
    const target = await startReceiver()
    let status = 301
    const redirecting = await startReceiver((_, res) =>
      res.writeHead(status, { location: `${target.url}/moved` }).end(),
    )
    t.after(() => Promise.all([target.close(), redirecting.close()]))
    for (status of [301, 302, 303, 307, 308]) {
      const outcome = await attempt(redirecting.url)
      assert.equal(outcome.result, 'failed')
      assert.equal(outcome.responseStatus, status)
      assert.equal(outcome.error, 'status')
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal(target.connections(), 0)
  })

  it("reports a 429's or 503's Retry-After in seconds", async (t) => {
    let status = 429
    const receiver = await startReceiver((_, res) =>
      res.writeHead(status, { 'retry-after': '120' }).end(),
    )
    t.after(() => receiver.close())
    assert.equal((await attempt(receiver.url)).retryAfterSeconds, 120)
    status = 503
    assert.equal((await attempt(receiver.url)).retryAfterSeconds, 120)
    status = 500
    assert.equal((await attempt(receiver.url)).retryAfterSeconds, undefined)
  })

  it('keeps the first 1 KiB of the body as text, invalid UTF-8 replaced, a character cut at 1 KiB left out', async (t) => {
    let body: Buffer = Buffer.alloc(0)
    const receiver = await startReceiver((_, res) => res.writeHead(500).end(body))
    t.after(() => receiver.close())
    body = Buffer.from([0x61, 0xff, 0xfe, 0x62])
    assert.equal((await attempt(receiver.url)).response, 'a\uFFFD\uFFFDb')
    body = Buffer.from('x'.repeat(5000))
    assert.equal((await attempt(receiver.url)).response, 'x'.repeat(BODY_KEPT_BYTES))
    // Cut inside a character: the part before the cut is left out, never replaced, so the text
    // stays within 1 KiB; an answer that ends inside one has it replaced.
    body = Buffer.from(`${'€'.repeat(400)}TAIL`)
    const cut = (await attempt(receiver.url)).response
    assert.equal(cut, '€'.repeat(Math.floor(BODY_KEPT_BYTES / 3)))
    assert.ok(Buffer.byteLength(cut) <= BODY_KEPT_BYTES)
    body = Buffer.from('€').subarray(0, 2)
    assert.equal((await attempt(receiver.url)).response, '\uFFFD')
    body = Buffer.alloc(0)
    assert.equal((await attempt(receiver.url)).response, '')
  })
})

describe('sendAttempt: receivers that misbehave', () => {
  it('times out a server that never answers, within WEBHOOK_TIMEOUT_MS, and closes the connection', async (t) => {
    const silent = await startRawServer(() => undefined)
    t.after(() => silent.close())
    const outcome = await attempt(silent.url, { timeoutMs: 300 })
    assert.equal(outcome.result, 'failed')
    assert.equal(outcome.error, 'timeout')
    assert.equal(outcome.responseStatus, null)
    assert.equal(outcome.response, '')
    assert.ok(outcome.durationMs >= 290 && outcome.durationMs < 1500, String(outcome.durationMs))
    assert.match(silent.data[0] ?? '', /^POST \/ HTTP\/1\.1\r\n/)
    await eventually(() => silent.closed() === 1)
  })

  it('times out headers that come after WEBHOOK_TIMEOUT_MS', async (t) => {
    const slow = await startRawServer((socket) => {
      setTimeout(() => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n'), 600)
    })
    t.after(() => slow.close())
    const outcome = await attempt(slow.url, { timeoutMs: 300 })
    assert.equal(outcome.error, 'timeout')
    assert.equal(outcome.responseStatus, null)
    assert.ok(outcome.durationMs >= 290 && outcome.durationMs < 590, String(outcome.durationMs))
  })

  it('times out a status line whose headers never end', async (t) => {
    const slow = await startRawServer((socket) => {
      socket.write('HTTP/1.1 200 OK\r\n')
      const timer = setInterval(() => socket.write('x-slow: 1\r\n'), 50)
      socket.on('close', () => clearInterval(timer))
    })
    t.after(() => slow.close())
    const outcome = await attempt(slow.url, { timeoutMs: 400 })
    assert.equal(outcome.error, 'timeout')
    assert.ok(outcome.durationMs >= 390 && outcome.durationMs < 1500, String(outcome.durationMs))
  })

  it('reads a body that never ends for 1 s only, then closes the connection', async (t) => {
    const trickle = await startRawServer((socket) => {
      socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n')
      const timer = setInterval(() => socket.write('1\r\na\r\n'), 20)
      socket.on('close', () => clearInterval(timer))
    })
    t.after(() => trickle.close())
    const outcome = await attempt(trickle.url, { timeoutMs: 300 })
    assert.equal(outcome.result, 'succeeded', 'the status decides, whatever the body does')
    assert.equal(outcome.responseStatus, 200)
    assert.ok(outcome.durationMs >= 990 && outcome.durationMs < 1800, String(outcome.durationMs))
    assert.match(outcome.response, /^a+$/)
    await eventually(() => trickle.closed() === 1, 1000)
  })

  it('reads 1 KiB of a huge body and closes the connection at once', async (t) => {
    let written = 0
    const flood = await startRawServer((socket) => {
      socket.write('HTTP/1.1 500 Oops\r\ncontent-length: 1000000000\r\n\r\n')
      const chunk = Buffer.alloc(64 * 1024, 0x7a)
      const pump = (): void => {
        while (!socket.destroyed && socket.write(chunk)) written += chunk.length
        if (!socket.destroyed) socket.once('drain', pump)
      }
      pump()
    })
    t.after(() => flood.close())
    const outcome = await attempt(flood.url)
    assert.equal(outcome.error, 'status')
    assert.equal(outcome.responseStatus, 500)
    assert.equal(outcome.response, 'z'.repeat(BODY_KEPT_BYTES))
    assert.ok(outcome.durationMs < 900, String(outcome.durationMs))
    await eventually(() => flood.closed() === 1, 1000)
    assert.ok(written < 64 * 1024 * 1024, `${written} bytes written before the close`)
  })

  it('fails on a connection reset before the answer', async (t) => {
    const resetting = await startRawServer((socket) => {
      socket.once('data', () => socket.resetAndDestroy())
    })
    t.after(() => resetting.close())
    const outcome = await attempt(resetting.url)
    assert.deepEqual(
      { ...outcome, durationMs: 0 },
      {
        result: 'failed',
        responseStatus: null,
        error: 'connection_failed',
        response: '',
        durationMs: 0,
      },
    )
  })

  it('fails on a refused connection', async () => {
    const gone = await startRawServer(() => undefined)
    await gone.close()
    const outcome = await attempt(gone.url)
    assert.equal(outcome.error, 'connection_failed')
    assert.equal(outcome.responseStatus, null)
  })

  it('fails on an answer that is not HTTP', async (t) => {
    const garbage = await startRawServer((socket) => socket.end('SSH-2.0-OpenSSH\r\n'))
    t.after(() => garbage.close())
    assert.equal((await attempt(garbage.url)).error, 'connection_failed')
  })

  it('fails with dns_failed on a name that does not resolve', async () => {
    const outcome = await attempt('http://no-such-host.invalid/hook')
    assert.equal(outcome.result, 'failed')
    assert.equal(outcome.error, 'dns_failed')
    assert.equal(outcome.responseStatus, null)
  })
})

describe('sendAttempt: addresses', () => {
  const receivers: Awaited<ReturnType<typeof startReceiver>>[] = []
  after(() => Promise.all(receivers.map((receiver) => receiver.close())))

  it('refuses a private literal without connecting when it is not allowed', async () => {
    const receiver = await startReceiver()
    receivers.push(receiver)
    for (const url of [receiver.url, `http://[::ffff:127.0.0.1]:${receiver.port}/`]) {
      const outcome = await attempt(url, { allow: ALLOW_NONE })
      assert.equal(outcome.error, 'private_address', url)
      assert.equal(outcome.responseStatus, null)
    }
    assert.equal(receiver.connections(), 0)
  })

  it('refuses a name that resolves only to refused addresses, and sends nothing', async () => {
    const receiver = await startReceiver()
    receivers.push(receiver)
    const url = `http://localhost:${receiver.port}/`
    assert.equal((await attempt(url, { allow: ALLOW_NONE })).error, 'private_address')
    // Allowing another block than the one localhost resolves to changes nothing.
    assert.equal(
      (await attempt(url, { allow: createAllowList(['10.0.0.0/8', '::1/128']) })).error,
      'private_address',
    )
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.equal(receiver.connections(), 0)
  })

  it('connects to the resolved address that was checked, when allowed', async () => {
    const receiver = await startReceiver()
    receivers.push(receiver)
    const outcome = await attempt(`http://localhost:${receiver.port}/`, { allow: LOOPBACK })
    assert.equal(outcome.result, 'succeeded')
    assert.equal(receiver.received[0]?.remoteAddress, '127.0.0.1')
    assert.equal(receiver.received[0]?.headers.host, `localhost:${receiver.port}`)
  })
})

describe('sendAttempt: connections', () => {
  it('reuses a kept-alive connection when the body ended, and opens a new one after a cut body', async (t) => {
    let body = 'ok'
    const receiver = await startReceiver((_, res) => res.writeHead(200).end(body))
    t.after(() => receiver.close())
    const agent = await createEndpointAgent(receiver.url)
    t.after(() => agent.destroy())
    await attempt(receiver.url, { agent })
    await attempt(receiver.url, { agent })
    assert.equal(receiver.connections(), 1)
    body = 'y'.repeat(10_000)
    await attempt(receiver.url, { agent })
    body = 'ok'
    const outcome = await attempt(receiver.url, { agent })
    assert.equal(outcome.result, 'succeeded')
    assert.equal(receiver.connections(), 2)
  })

  it('abandons an attempt at once when its signal aborts', async (t) => {
    const silent = await startRawServer(() => undefined)
    t.after(() => silent.close())
    const controller = new AbortController()
    const pending = attempt(silent.url, { timeoutMs: 10_000, signal: controller.signal })
    await eventually(() => silent.connections() === 1)
    controller.abort()
    const outcome = await pending
    assert.equal(outcome.result, 'failed')
    assert.ok(outcome.durationMs < 1000, String(outcome.durationMs))
    await eventually(() => silent.closed() === 1)
  })
})
