import assert from 'node:assert/strict'
import { createServer, type IncomingMessage } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { describe, it, type TestContext } from 'node:test'

import {
  ClientClosedError,
  hasBody,
  MAX_BODY_BYTES,
  parseJsonBody,
  readBody,
  validateContentType,
} from '../../src/http/body.js'
import { HttpError, toHttpError } from '../../src/http/problem.js'
import { request } from '../helpers/http.js'
import { sendOverSocket } from '../helpers/socket-http.js'

/**
 * A real node:http server that runs `work` on each request and answers its result as JSON:
 * `{ value }` on success, `{ code }` with the error's status otherwise.
 */
async function serve(t: TestContext, work: (req: IncomingMessage) => unknown): Promise<string> {
  const server = createServer((req, res) => {
    Promise.resolve()
      .then(() => work(req))
      .then(
        (value) => {
          res.setHeader('content-type', 'application/json')
          res.end(JSON.stringify({ value }))
        },
        (caught: unknown) => {
          const error = toHttpError(caught)
          res.statusCode = error.status
          res.setHeader('content-type', 'application/json')
          res.setHeader('connection', 'close')
          res.end(JSON.stringify({ code: error.code }))
        },
      )
  })
  await new Promise<void>((resolve) => {
    server.listen(0, '127.0.0.1', resolve)
  })
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => {
          resolve()
        })
      }),
  )
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
}

function refusedWith(code: string): (error: unknown) => boolean {
  return (error) => {
    assert.ok(error instanceof HttpError)
    assert.equal(error.code, code)
    return true
  }
}

describe('parseJsonBody', () => {
  it('parses UTF-8 JSON', () => {
    assert.deepEqual(parseJsonBody(Buffer.from('{"name":"Zoë 😀"}'), 'required'), {
      name: 'Zoë 😀',
    })
    assert.equal(parseJsonBody(Buffer.from('null'), 'required'), null)
  })

  it('gives undefined for an empty optional body and a 400 for an empty required one', () => {
    assert.equal(parseJsonBody(Buffer.alloc(0), 'optional'), undefined)
    assert.throws(() => parseJsonBody(Buffer.alloc(0), 'required'), refusedWith('bad_request'))
  })

  for (const [name, bytes] of [
    ['broken JSON', Buffer.from('{"a":')],
    ['white space only', Buffer.from(' \n')],
    ['an invalid UTF-8 byte', Buffer.from([0x22, 0xff, 0x22])],
    ['a truncated UTF-8 sequence', Buffer.from([0x22, 0xe2, 0x82, 0x22])],
    ['an overlong UTF-8 sequence', Buffer.from([0x22, 0xc0, 0xaf, 0x22])],
    ['an encoded surrogate', Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22])],
  ] as const) {
    it(`answers 400 bad_request for ${name}`, () => {
      assert.throws(() => parseJsonBody(bytes, 'optional'), refusedWith('bad_request'))
    })
  }
})

describe('validateContentType', () => {
  const cases: [string, Record<string, string>, string | undefined][] = [
    ['application/json', { 'content-type': 'application/json' }, undefined],
    [
      'upper case and a utf-8 charset',
      { 'content-type': 'APPLICATION/JSON; Charset="UTF-8"' },
      undefined,
    ],
    ['another parameter', { 'content-type': 'application/json; profile=x' }, undefined],
    [
      'a quoted parameter holding ; and charset=',
      { 'content-type': 'application/json; profile="urn:x;charset=latin1"' },
      undefined,
    ],
    [
      'a quoted-pair in a quoted charset',
      { 'content-type': 'application/json; charset="utf\\-8"' },
      undefined,
    ],
    [
      'a latin-1 charset after a stray quote',
      { 'content-type': 'application/json; p=a"b; charset=latin1' },
      'unsupported_media_type',
    ],
    [
      'a latin-1 charset after an unclosed quote',
      { 'content-type': 'application/json; p="a; charset=latin1' },
      'unsupported_media_type',
    ],
    [
      'a latin-1 charset after a quoted parameter',
      { 'content-type': 'application/json; p="a;b"; charset=latin1' },
      'unsupported_media_type',
    ],
    ['text/plain', { 'content-type': 'text/plain' }, 'unsupported_media_type'],
    ['a prefix of the type', { 'content-type': 'application/js' }, 'unsupported_media_type'],
    [
      'a latin-1 charset',
      { 'content-type': 'application/json; charset=latin1' },
      'unsupported_media_type',
    ],
    [
      'an empty charset',
      { 'content-type': 'application/json; charset=' },
      'unsupported_media_type',
    ],
  ]
  for (const [name, headers, code] of cases) {
    it(`${code === undefined ? 'takes' : 'refuses'} ${name}`, async (t) => {
      const url = await serve(t, (req) => {
        validateContentType(req, ['application/json'])
      })
      const res = await request('POST', url, { body: '{}', headers })
      if (code === undefined) assert.equal(res.status, 200, res.text)
      else assert.deepEqual([res.status, res.body], [415, { code }])
    })
  }

  it('refuses a body without a Content-Type, and takes no body without one', async (t) => {
    const url = await serve(t, (req) => {
      validateContentType(req, ['application/json'])
    })
    const withBody = await request('POST', url, { body: new TextEncoder().encode('{}') })
    assert.deepEqual([withBody.status, withBody.body], [415, { code: 'unsupported_media_type' }])
    const withoutBody = await request('POST', url)
    assert.equal(withoutBody.status, 200, withoutBody.text)
  })
})

describe('hasBody', () => {
  it('is true for a non-zero Content-Length or chunked transfer only', async (t) => {
    const url = await serve(t, (req) => hasBody(req))
    const seen = async (headers: Record<string, string>, body?: string): Promise<unknown> => {
      const res = await sendOverSocket(url, {
        method: 'POST',
        target: '/',
        headers,
        ...(body === undefined ? {} : { body }),
      })
      return res.body
    }
    assert.deepEqual(await seen({ 'content-length': '0' }), { value: false })
    assert.deepEqual(await seen({ 'content-length': '000' }), { value: false })
    assert.deepEqual(await seen({}), { value: false })
    assert.deepEqual(await seen({ 'content-length': '2' }, '{}'), { value: true })
    assert.deepEqual(await seen({ 'transfer-encoding': 'chunked' }, '2\r\n{}\r\n0\r\n\r\n'), {
      value: true,
    })
  })
})

describe('readBody', () => {
  it('limits bodies to 64 KiB by default', () => {
    assert.equal(MAX_BODY_BYTES, 65_536)
  })

  it('reads a body up to the limit, and refuses one byte more with 413', async (t) => {
    const url = await serve(t, async (req) => (await readBody(req, 10)).toString('utf8'))
    const ok = await request('POST', url, { body: '0123456789' })
    assert.deepEqual(ok.body, { value: '0123456789' })
    const over = await request('POST', url, { body: '0123456789x' })
    assert.deepEqual([over.status, over.body], [413, { code: 'payload_too_large' }])
  })

  it('counts bytes, not characters', async (t) => {
    const url = await serve(t, async (req) => (await readBody(req, 10)).length)
    const fits = await request('POST', url, { body: 'ééééé' })
    assert.deepEqual(fits.body, { value: 10 })
    const over = await request('POST', url, { body: 'éééééx' })
    assert.equal(over.status, 413)
  })

  it('counts chunked bodies as they arrive', async (t) => {
    const url = await serve(t, async (req) => (await readBody(req, 10)).toString('utf8'))
    const send = (chunks: string): ReturnType<typeof sendOverSocket> =>
      sendOverSocket(url, {
        method: 'POST',
        target: '/',
        headers: { 'transfer-encoding': 'chunked' },
        body: chunks,
      })
    const ok = await send('5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n')
    assert.deepEqual(ok.body, { value: '0123456789' })
    const over = await send('5\r\n01234\r\n6\r\n56789x\r\n0\r\n\r\n')
    assert.deepEqual([over.status, over.body], [413, { code: 'payload_too_large' }])
  })

  it('refuses an announced length over the limit before any byte of the body', async (t) => {
    const url = await serve(t, async (req) => (await readBody(req)).length)
    const res = await sendOverSocket(url, {
      method: 'POST',
      target: '/',
      headers: { 'content-length': String(MAX_BODY_BYTES + 1) },
      timeoutMs: 2000,
    })
    assert.deepEqual([res.status, res.body], [413, { code: 'payload_too_large' }])
  })

  it('reads an empty body as zero bytes', async (t) => {
    const url = await serve(t, async (req) => (await readBody(req)).length)
    assert.deepEqual((await request('POST', url)).body, { value: 0 })
  })

  it('rejects with ClientClosedError when the client left before it was called', async (t) => {
    let settled: (outcome: unknown) => void = () => undefined
    const outcome = new Promise<unknown>((resolve) => {
      settled = resolve
    })
    // Called only once the request is closed, as after a wait for the database.
    const url = await serve(t, (req) =>
      new Promise<void>((resolve) => {
        req.once('close', resolve)
      }).then(() => readBody(req).then(settled, settled)),
    )
    const { hostname, port } = new URL(url)
    const socket = connect(Number(port), hostname)
    socket.on('error', () => undefined)
    socket.write('POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}', () => {
      setTimeout(() => socket.destroy(), 50)
    })
    const late = new Promise((resolve) => setTimeout(() => resolve('never settled'), 2000))
    const result = await Promise.race([outcome, late])
    assert.ok(result instanceof ClientClosedError, String(result))
  })
})
