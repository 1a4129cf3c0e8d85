import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { describe, it } from 'node:test'

import { startChild } from '../helpers/child.js'
import type { Problem } from '../helpers/http.js'
import { tryRequest } from '../helpers/ops.js'
import {
  assertClosingProblem,
  exchange,
  parseRawResponse,
  rawCreate,
} from '../helpers/raw-exchange.js'
import { makeTempDir, startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { assertUnchangedBy } from '../helpers/users-suite.js'

// Request lines that Node's parser takes but that are not HTTP/1.1 requests for this service,
// sent as raw bytes (fetch cannot send them). Each is refused before it is routed, as
// problem+json, and the connection closes.

/** A create whose request line is `line`, refused with 400 before it is routed: its problem. */
async function refuseLine(s: TestService, line: string): Promise<Problem> {
  const bytes = rawCreate(
    ['Host: x', `Authorization: Bearer ${s.token}`, 'Content-Type: application/json'],
    'Refused',
    uniqueEmail(),
  ).replace('POST /users HTTP/1.1', line)
  return assertUnchangedBy(s, async () =>
    assertClosingProblem(await exchange(s.url, bytes), 400, 'bad_request'),
  )
}

describe('request targets', () => {
  // RFC 9112 §3.2: no request target has a fragment. Node passes one on as part of the path or
  // of the last query value, where a proxy in front may have cut it off and routed the rest.
  for (const [name, target] of [
    ['a fragment after the path', '/users#x'],
    ['a fragment after the query', '/users?limit=1#x'],
    ['an empty fragment', '/users#'],
    ['a fragment in an absolute-form target', 'http://x/users#x'],
  ] as const) {
    it(`answers a target with ${name} with 400 bad_request, closes, and changes nothing`, async (t) => {
      const s = await startService(t)
      const problem = await refuseLine(s, `POST ${target} HTTP/1.1`)
      assert.match(problem.detail, /may not carry a fragment/)
    })
  }

  // RFC 9112 §3.2.2: an absolute-form target's authority takes the place of Host; RFC 9110 §4.2.1
  // and RFC 9110 §4.2.4: an http URI without a host, or with a user name, is not valid.
  for (const [name, target, detail] of [
    ['an empty host', 'http:///users', /not a host name/],
    ['only a port', 'http://:80/users', /not a host name/],
    ['a user name', 'https://u@x/users', /not a host name/],
    ['an unclosed IPv6 literal', 'http://[::1/users', /not a host name/],
    ['another scheme', 'ftp://x/users', /http or https/],
  ] as const) {
    it(`answers an absolute-form target with ${name} with 400 bad_request, closes, and changes nothing`, async (t) => {
      const s = await startService(t)
      const problem = await refuseLine(s, `POST ${target} HTTP/1.1`)
      assert.match(problem.detail, detail)
    })
  }

  it('takes an absolute-form target with a host of every form', async (t) => {
    const s = await startService(t)
    for (const authority of ['x', 'X.example:8080', '127.0.0.1', '[::1]:80', 'a.b-c_d~e%41']) {
      for (const scheme of ['http', 'HTTPS']) {
        const result = await exchange(
          s.url,
          `GET ${scheme}://${authority}/users?limit=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${s.token}\r\nConnection: close\r\n\r\n`,
        )
        assert.equal(result.response?.status, 200, `${scheme}://${authority}: ${result.raw}`)
      }
    }
  })

  it('reads a percent-encoded # as data, not as a fragment', async (t) => {
    const s = await startService(t)
    const result = await exchange(
      s.url,
      `GET /users?q=a%23b HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${s.token}\r\nConnection: close\r\n\r\n`,
    )
    assert.equal(result.response?.status, 200, result.raw)
    assert.deepEqual(result.response?.body, { items: [], nextCursor: null })
  })
})

describe('the asterisk form (*)', () => {
  // RFC 9112 §3.2.4: `*` is a target only for an OPTIONS about the server as a whole. Node
  // passes it through for any method, where it was routed as an unknown path (404).
  for (const method of ['POST', 'GET', 'DELETE']) {
    it(`answers ${method} * with 400 bad_request, closes, and changes nothing`, async (t) => {
      const s = await startService(t)
      const problem = await refuseLine(s, `${method} * HTTP/1.1`)
      assert.match(problem.detail, /for OPTIONS only/)
    })
  }

  it('answers OPTIONS * with 204 and no body, and serves the next request on the connection', async (t) => {
    const s = await startService(t)
    const result = await exchange(
      s.url,
      `OPTIONS * HTTP/1.1\r\nHost: x\r\nX-Request-Id: server-wide\r\n\r\n` +
        `GET /users HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${s.token}\r\nConnection: close\r\n\r\n`,
    )
    const res = result.response
    assert.equal(res?.status, 204, result.raw)
    assert.equal(res.headers.get('x-request-id'), 'server-wide')
    assert.equal(res.headers.get('content-length'), undefined)
    assert.equal(res.headers.get('connection'), 'keep-alive')
    const second = parseRawResponse(result.raw.slice(result.raw.indexOf('\r\n\r\n') + 4))
    assert.equal(second?.status, 200, result.raw)
    assert.deepEqual(second.body, { items: [], nextCursor: null })
  })

  it('answers OPTIONS * with 204 also when it carries the fields of a CORS preflight', async (t) => {
    const origin = 'https://app.example.test'
    const s = await startService(t, { corsOrigins: [origin] })
    const result = await exchange(
      s.url,
      `OPTIONS * HTTP/1.1\r\nHost: x\r\nOrigin: ${origin}\r\nAccess-Control-Request-Method: GET\r\nConnection: close\r\n\r\n`,
    )
    assert.equal(result.response?.status, 204, result.raw)
    assert.equal(result.response.text, '')
    assert.equal(result.response.headers.get('access-control-allow-origin'), origin)
  })

  it('answers OPTIONS on a path without the preflight fields with 405 and its Allow, as before', async (t) => {
    const s = await startService(t)
    const result = await exchange(
      s.url,
      'OPTIONS /users HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    )
    assert.equal(result.response?.status, 405, result.raw)
    assert.equal(result.response.headers.get('allow'), 'GET, POST, HEAD')
    assert.equal((result.response.body as Problem).code, 'method_not_allowed')
  })
})

describe('transfer codings', () => {
  /** A chunked create whose Transfer-Encoding lines are `lines`; its body is plain JSON. */
  function chunkedCreate(s: TestService, version: string, lines: readonly string[]): string {
    const body = JSON.stringify({ email: uniqueEmail(), name: 'Coded' })
    return [
      `POST /users ${version}`,
      'Host: x',
      `Authorization: Bearer ${s.token}`,
      'Content-Type: application/json',
      ...lines,
      '',
      `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    ].join('\r\n')
  }

  // RFC 9112 §6.1. Node's parser only checks that chunked comes last, then reads the body as
  // chunked alone: the gzip (or any) coding before it would be dropped, and the bytes read as JSON.
  for (const [name, lines] of [
    ['gzip, chunked', ['Transfer-Encoding: gzip, chunked']],
    ['an unknown coding before chunked', ['Transfer-Encoding: x-custom, chunked']],
    ['gzip and chunked on two lines', ['Transfer-Encoding: gzip', 'Transfer-Encoding: chunked']],
  ] as const) {
    it(`answers a body with ${name} with 400 bad_request, closes, and changes nothing`, async (t) => {
      const s = await startService(t)
      const result = await assertUnchangedBy(s, async () =>
        exchange(s.url, chunkedCreate(s, 'HTTP/1.1', lines)),
      )
      const problem = assertClosingProblem(result, 400, 'bad_request')
      assert.match(problem.detail, /only transfer coding this service reads is chunked/)
    })
  }

  it('takes chunked in any case and with empty list elements', async (t) => {
    const s = await startService(t)
    for (const lines of [['Transfer-Encoding: Chunked'], ['Transfer-Encoding: , chunked']]) {
      const result = await exchange(s.url, chunkedCreate(s, 'HTTP/1.1', lines), {
        untilResponse: true,
      })
      assert.equal(result.response?.status, 201, result.raw)
    }
  })

  // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing; the connection
  // must close after it, so bytes behind it are never read as a next request.
  it('answers HTTP/1.0 with Transfer-Encoding with 400 bad_request, closes, and reads nothing behind it', async (t) => {
    const s = await startService(t)
    const bytes = `${chunkedCreate(s, 'HTTP/1.0', ['Connection: keep-alive', 'Transfer-Encoding: chunked'])}GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n`
    const result = await assertUnchangedBy(s, async () => exchange(s.url, bytes))
    const problem = assertClosingProblem(result, 400, 'bad_request')
    assert.match(problem.detail, /HTTP\/1\.0 request may not carry Transfer-Encoding/)
    assert.equal(result.raw.match(/HTTP\/1\.1 \d{3}/g)?.length, 1, result.raw)
  })
})

describe('HTTP versions', () => {
  // Node's parser takes HTTP/2.0 in an HTTP/1 request line, and a request line without a
  // version (HTTP/0.9), and would answer both as HTTP/1.1.
  for (const [name, version] of [
    ['HTTP/2.0', ' HTTP/2.0'],
    ['HTTP/0.9 (no version on the request line)', ''],
  ] as const) {
    it(`answers a request of ${name} with 400 bad_request, closes, and changes nothing`, async (t) => {
      const s = await startService(t)
      const problem = await refuseLine(s, `POST /users${version}`)
      assert.match(problem.detail, /speaks HTTP\/1\.1 and HTTP\/1\.0, not HTTP\/[02]\.[09]/)
    })
  }
})

describe('CONNECT', () => {
  it('answers 400 bad_request as problem+json with the request id, closes, and changes nothing', async (t) => {
    const s = await startService(t)
    const problem = await assertUnchangedBy(s, async () =>
      assertClosingProblem(
        await exchange(
          s.url,
          `CONNECT db.internal:5432 HTTP/1.1\r\nHost: db.internal:5432\r\nAuthorization: Bearer ${s.token}\r\nX-Request-Id: tunnel-1\r\n\r\n`,
        ),
        400,
        'bad_request',
      ),
    )
    assert.equal(problem.requestId, 'tunnel-1')
    assert.match(problem.detail, /not a proxy/)
    assert.ok(
      s.logs.some(
        (line) => line.msg === 'refused a CONNECT request' && line.requestId === 'tunnel-1',
      ),
      'the refusal is logged with its request id',
    )
  })

  it('does not read the bytes sent after its head as a next request', async (t) => {
    const s = await startService(t)
    const next = rawCreate(
      ['Host: x', `Authorization: Bearer ${s.token}`, 'Content-Type: application/json'],
      'Smuggled',
      uniqueEmail(),
    )
    const result = await assertUnchangedBy(s, async () =>
      exchange(s.url, `CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n${next}`),
    )
    assertClosingProblem(result, 400, 'bad_request')
    assert.equal(result.raw.match(/HTTP\/1\.1 \d{3}/g)?.length, 1, result.raw)
  })

  // RFC 9112 §9.3.2: answers go out in the order the requests came. A CONNECT pipelined behind a
  // create whose answer is not out yet must not take its place: the client would read the 400 as
  // the create's answer, though the user was stored.
  it('answers the requests before it first, in order, then refuses it and closes', async (t) => {
    const s = await startService(t)
    const email = uniqueEmail()
    const post = rawCreate(
      ['Host: x', `Authorization: Bearer ${s.token}`, 'Content-Type: application/json'],
      'Before the tunnel',
      email,
    )
    const result = await exchange(s.url, `${post}CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n`)
    assert.equal(result.closed, true, result.raw)
    // A body ends without a line break: the next status line follows it on the same line.
    const statuses = (result.raw.match(/HTTP\/1\.1 \d{3} /g) ?? []).map((line) =>
      Number(line.slice(9, 12)),
    )
    assert.deepEqual(statuses, [201, 400], result.raw)
    assert.match(result.raw, /"detail":"This service is not a proxy/)
    const created = await s.call('GET', `/users?email=${encodeURIComponent(email)}`)
    assert.equal(created.json<{ items: unknown[] }>().items.length, 1)
    assert.ok(s.logs.some((entry) => entry['method'] === 'POST' && entry['status'] === 201))
  })

  // Node takes its own listeners off a CONNECT's socket when it hands it over: a reset while the
  // refusal is written must not become an uncaught error that ends the process.
  it('survives clients that reset the connection while their refusal is written', async (t) => {
    const child = await startChild({ dataDir: await makeTempDir(t) })
    t.after(() => child.stop('SIGKILL'))
    const { hostname, port } = new URL(child.url)
    for (let round = 0; round < 100; round += 1) {
      await new Promise<void>((resolve) => {
        const socket = connect(Number(port), hostname, () => {
          // A large tunnel payload keeps the socket busy reading while the answer goes out.
          socket.write(`CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n${'z'.repeat(64 * 1024)}`)
          setImmediate(() => {
            socket.resetAndDestroy()
            resolve()
          })
        })
        socket.on('error', () => resolve())
      })
    }
    const health = await tryRequest('GET', `${child.url}/healthz`)
    assert.ok(
      'status' in health && health.status === 200,
      `${JSON.stringify(health)}\n${child.stderr()}`,
    )
    assert.equal(child.proc.exitCode, null, child.stderr())
    assert.doesNotMatch(child.stdout(), /"level":"error"/)
  })
})
