import assert from 'node:assert/strict'
import type { Socket } from 'node:net'
import { describe, it, type TestContext } from 'node:test'

import { exchange, openSocket, parseRawResponse, rawCreate } from '../helpers/raw-exchange.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { assertUnchangedBy } from '../helpers/users-suite.js'

const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n'

/** Collects what the server sends on `socket`, as latin1 text. */
function collect(socket: Socket): {
  readonly text: () => string
  until: (ready: (text: string) => boolean) => Promise<string>
} {
  let received = ''
  const waiters = new Set<() => void>()
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1')
    for (const wake of waiters) wake()
  })
  socket.on('error', () => undefined)
  return {
    text: () => received,
    until: (ready) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`gave up waiting; received: ${received.slice(0, 300)}`))
        }, 5000)
        const check = (): void => {
          if (!ready(received)) return
          waiters.delete(check)
          clearTimeout(timer)
          resolve(received)
        }
        waiters.add(check)
        check()
      }),
  }
}

function head(lines: readonly string[]): string {
  return `${lines.join('\r\n')}\r\n\r\n`
}

function postHead(
  s: TestService,
  target: string,
  type: string,
  length: number,
  token = s.token,
): string {
  return head([
    `POST ${target} HTTP/1.1`,
    'Host: x',
    `Authorization: Bearer ${token}`,
    `Content-Type: ${type}`,
    `Content-Length: ${length}`,
    'Expect: 100-continue',
  ])
}

/**
 * Sends a POST head that expects 100, checks that the 100 (and nothing else) comes before the body,
 * then sends the body; what the server sends is collected on.
 */
async function bodyAfterContinue(
  t: TestContext,
  s: TestService,
  target: string,
  type: string,
  body: string,
): Promise<ReturnType<typeof collect>> {
  const socket = await openSocket(s.url)
  t.after(() => socket.destroy())
  const received = collect(socket)
  socket.write(postHead(s, target, type, Buffer.byteLength(body)))
  await received.until((text) => text.length >= CONTINUE.length)
  assert.equal(received.text(), CONTINUE, 'only the 100, before the body')
  socket.write(body)
  return received
}

// RFC 9110 §10.1.1: the 100 invites the body; a request refused from its head alone should not get it.
describe('Expect: 100-continue', () => {
  const refusals: Array<[string, (s: TestService) => string, number, string]> = [
    [
      'a Content-Length over the body limit',
      (s) => postHead(s, '/users', 'application/json', 10_000_000),
      413,
      'payload_too_large',
    ],
    [
      'a token that does not verify',
      (s) => postHead(s, '/users', 'application/json', 40, 'not-a-token'),
      401,
      'token_invalid',
    ],
    [
      'a media type the route does not take',
      (s) => postHead(s, '/users', 'text/plain', 40),
      415,
      'unsupported_media_type',
    ],
  ]
  for (const [name, request, status, code] of refusals) {
    it(`answers ${status} without a 100 first to a head with ${name}, and changes nothing`, async (t) => {
      const s = await startService(t)
      const result = await assertUnchangedBy(s, () =>
        exchange(s.url, request(s), { untilResponse: true, waitMs: 3000 }),
      )
      assert.ok(result.raw.startsWith(`HTTP/1.1 ${status} `), result.raw.slice(0, 200))
      assert.ok(!result.raw.includes('100 Continue'), 'no 100 was sent')
      const problem = result.response?.body as { code?: unknown } | undefined
      assert.equal(problem?.code, code)
    })
  }

  it('sends 100 once the body is wanted, then answers the body sent after it', async (t) => {
    const s = await startService(t)
    const email = uniqueEmail()
    const body = JSON.stringify({ email, name: 'Waited For 100' })
    const received = await bodyAfterContinue(t, s, '/users', 'application/json', body)
    const text = await received.until(
      (all) => parseRawResponse(all.slice(CONTINUE.length)) !== undefined,
    )
    const answer = parseRawResponse(text.slice(CONTINUE.length))
    assert.ok(answer !== undefined, text)
    assert.equal(answer.status, 201, text)
    assert.equal((answer.body as { email?: unknown }).email, email)
    assert.equal((await s.call('GET', answer.headers.get('location') ?? '/')).status, 200)
  })

  it('sends 100 to an import before the head of its answer, then imports the lines sent after it', async (t) => {
    const s = await startService(t)
    const lines = `${JSON.stringify({ email: uniqueEmail(), name: 'Imported After 100' })}\n`
    const received = await bodyAfterContinue(t, s, '/users:import', 'application/x-ndjson', lines)
    const text = await received.until((all) => all.includes('\r\n0\r\n\r\n'))
    assert.match(text.slice(CONTINUE.length), /^HTTP\/1\.1 200 OK\r\n/)
    assert.match(text, /"status":201/)
    const list = await s.call('GET', '/users')
    assert.equal((list.body as { items: unknown[] }).items.length, 1)
  })
})

// RFC 9110 §10.1.1: an expectation the server cannot meet may be refused with 417.
describe('an Expect other than 100-continue', () => {
  it('is 417 expectation_failed as problem+json on HTTP/1.1, closes, and changes nothing', async (t) => {
    const s = await startService(t)
    const request = rawCreate(
      [
        'Host: x',
        `Authorization: Bearer ${s.token}`,
        'Content-Type: application/json',
        'Expect: 200-ok',
        'X-Request-Id: expect-other',
      ],
      'Unmet Expectation',
      uniqueEmail(),
    )
    const result = await assertUnchangedBy(s, () => exchange(s.url, request))
    const answer = result.response
    assert.ok(answer !== undefined, result.raw)
    assert.equal(answer.status, 417, result.raw.slice(0, 200))
    assert.match(answer.headers.get('content-type') ?? '', /^application\/problem\+json/)
    assert.equal(answer.headers.get('x-request-id'), 'expect-other')
    assert.equal(answer.headers.get('connection'), 'close')
    const problem = answer.body as { code?: unknown; status?: unknown; requestId?: unknown }
    assert.equal(problem.code, 'expectation_failed')
    assert.equal(problem.status, 417)
    assert.equal(problem.requestId, 'expect-other')
    assert.ok(result.closed, 'the server closed the connection')
    const line = s.logs.find((entry) => entry['requestId'] === 'expect-other')
    assert.equal(line?.['status'], 417)
  })

  it('is ignored on HTTP/1.0, which has no expectations', async (t) => {
    const s = await startService(t)
    const email = uniqueEmail()
    const request = rawCreate(
      [`Authorization: Bearer ${s.token}`, 'Content-Type: application/json', 'Expect: 200-ok'],
      'Old Client',
      email,
    ).replace('POST /users HTTP/1.1', 'POST /users HTTP/1.0')
    const answer = (await exchange(s.url, request)).response
    assert.ok(answer !== undefined, 'a whole answer')
    assert.equal(answer.status, 201, answer.text)
    assert.equal((answer.body as { email?: unknown }).email, email)
  })
})

// Node drops the header lines past its count limit (2,000 by default) without a word: a second
// Authorization hidden behind them must still be seen.
describe('a repeated header behind 2,100 other lines', () => {
  it('is refused with 400 bad_request, and changes nothing', async (t) => {
    const s = await startService(t)
    const request = rawCreate(
      [
        'Host: x',
        `Authorization: Bearer ${s.token}`,
        'Content-Type: application/json',
        ...Array.from({ length: 2100 }, () => 'a:'),
        'Authorization: Bearer another',
      ],
      'Hidden Second Token',
      uniqueEmail(),
    )
    const result = await assertUnchangedBy(s, () => exchange(s.url, request))
    assert.equal(result.response?.status, 400, result.raw.slice(0, 200))
    const problem = result.response?.body as { code?: unknown; detail?: unknown } | undefined
    assert.equal(problem?.code, 'bad_request')
    assert.match(String(problem?.detail), /one Authorization header only/)
  })
})
