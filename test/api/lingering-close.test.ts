import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { after, before, describe, it, type TestContext } from 'node:test'

import { MAX_BODY_BYTES } from '../../src/http/body.js'
import { LINGER_BYTES, LINGER_MS } from '../../src/http/lingering-close.js'
import { type RunningChild, startChild } from '../helpers/child.js'
import { holdRequest, waitFor } from '../helpers/ops.js'
import { startService, type TestService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/*
 * RFC 9112 §9.6: a server that answers before it has read the whole request, and then closes,
 * must close in stages (answer, half-close, read on for a while) or the reset that closing a socket
 * with unread bytes causes can destroy the answer before the client reads it. The victim is a
 * client that sends its whole body before it reads (as blocking HTTP clients do): its next write
 * after the reset fails and the answer waiting in its receive buffer is lost.
 */

const CHUNK = 16 * 1024
const ROUNDS = 50
const AT_ONCE = 5
/** Generous: the only clock is the event awaited, this is when a test gives up on it. */
const WAIT_MS = 10_000

interface Answer {
  readonly status: number
  /** Header names in lower case. */
  readonly headers: ReadonlyMap<string, string>
  readonly text: string
  readonly body: unknown
  /** Bytes of the stream after this answer. */
  readonly rest: Buffer
}

/** The first whole HTTP/1.1 response in `bytes` (Content-Length framed), or undefined. */
function readAnswer(bytes: Buffer): Answer | undefined {
  const end = bytes.indexOf('\r\n\r\n')
  if (end === -1) return undefined
  const [statusLine = '', ...lines] = bytes.subarray(0, end).toString('latin1').split('\r\n')
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine)?.[1] ?? Number.NaN)
  const headers = new Map<string, string>()
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim())
  }
  const length = Number(headers.get('content-length') ?? 0)
  const start = end + 4
  if (bytes.length < start + length) return undefined
  const text = bytes.subarray(start, start + length).toString('utf8')
  const body: unknown =
    /json/.test(headers.get('content-type') ?? '') && text !== '' ? JSON.parse(text) : undefined
  return { status, headers, text, body, rest: bytes.subarray(start + length) }
}

/** Asserts a whole problem+json answer that closes the connection. */
function assertClosingProblem(
  answer: Answer | undefined,
  status: number,
  code: string,
  what: string,
): void {
  assert.ok(answer !== undefined, `${what}: no whole answer arrived`)
  assert.equal(answer.status, status, `${what}: ${answer.text}`)
  assert.match(answer.headers.get('content-type') ?? '', /^application\/problem\+json/, what)
  assert.equal(answer.headers.get('connection'), 'close', what)
  const problem = answer.body as { status?: unknown; code?: unknown; requestId?: unknown }
  assert.equal(problem.code, code, `${what}: ${answer.text}`)
  assert.equal(problem.status, status, what)
  assert.equal(problem.requestId, answer.headers.get('x-request-id'), what)
}

function head(lines: readonly string[]): Buffer {
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1')
}

/** A request head for POST /users; `auth` false leaves the token out. */
function postHead(framing: string, options: { auth?: boolean; contentType?: string } = {}): Buffer {
  const lines = ['POST /users HTTP/1.1', 'host: localhost']
  if (options.auth !== false) lines.push(`authorization: Bearer ${makeToken()}`)
  lines.push(`content-type: ${options.contentType ?? 'application/json'}`, framing)
  return head(lines)
}

/** `count` chunks of 16 KiB in chunked framing, one Buffer each, then the last chunk. */
function chunkedPieces(count: number): Buffer[] {
  const chunk = Buffer.concat([
    Buffer.from(`${CHUNK.toString(16)}\r\n`),
    Buffer.alloc(CHUNK, 0x61),
    Buffer.from('\r\n'),
  ])
  return [...Array.from({ length: count }, () => chunk), Buffer.from('0\r\n\r\n')]
}

function plainPieces(count: number): Buffer[] {
  return Array.from({ length: count }, () => Buffer.alloc(CHUNK, 0x61))
}

interface Upload {
  readonly head: Buffer
  readonly pieces: readonly Buffer[]
}

interface UploadOutcome {
  readonly received: Buffer
  /** The first socket error the client saw (EPIPE or ECONNRESET is what a lost answer looks like). */
  readonly error: string | undefined
}

const pause = new Int32Array(new SharedArrayBuffer(4))

/** Keeps everything a socket receives, and its first error, until it closes. */
function collect(socket: Socket): { received: () => Buffer; outcome: Promise<UploadOutcome> } {
  const chunks: Buffer[] = []
  let error: string | undefined
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk)
  })
  socket.on('error', (caught: NodeJS.ErrnoException) => {
    error ??= caught.code ?? caught.message
  })
  const received = (): Buffer => Buffer.concat(chunks)
  const outcome = new Promise<UploadOutcome>((resolve) => {
    const timer = setTimeout(() => {
      socket.destroy()
    }, WAIT_MS)
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ received: received(), error })
    })
  })
  return { received, outcome }
}

/**
 * Sends uploads side by side the way a blocking client does: every piece is written without
 * giving the event loop a turn (with a short busy pause between pieces, as a client producing its
 * body would), and only then is anything read. A server that resets the connection while a piece
 * is still coming makes a later write fail, and the answer already received is never read. The
 * service must run in another process: this thread blocks while it writes. `between` runs after
 * each round of pieces, still without a turn of the event loop.
 */
function writeWhileBusy(
  sockets: readonly Socket[],
  uploads: readonly Upload[],
  pauseMs: number,
  between?: (piece: number) => void,
): void {
  sockets.forEach((socket, index) => {
    socket.write(uploads[index]?.head ?? '')
  })
  const longest = Math.max(...uploads.map((upload) => upload.pieces.length))
  for (let piece = 0; piece < longest; piece += 1) {
    Atomics.wait(pause, 0, 0, pauseMs)
    sockets.forEach((socket, index) => {
      const bytes = uploads[index]?.pieces[piece]
      if (bytes !== undefined) socket.write(bytes)
    })
    between?.(piece)
  }
}

async function connectTo(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port), hostname)
  await once(socket, 'connect')
  return socket
}

/** Connects one socket per upload, sends them all while busy, and waits for every connection to close. */
async function uploadWhileBusy(
  url: string,
  uploads: readonly Upload[],
  pauseMs: number,
): Promise<UploadOutcome[]> {
  const sockets = await Promise.all(uploads.map(() => connectTo(url)))
  const outcomes = sockets.map((socket) => collect(socket).outcome)
  writeWhileBusy(sockets, uploads, pauseMs)
  return Promise.all(outcomes)
}

/** Runs `rounds` uploads, `AT_ONCE` side by side, and checks every answer. */
async function uploadRounds(
  url: string,
  rounds: number,
  makeUpload: () => Upload,
  check: (outcome: UploadOutcome, round: number) => void,
): Promise<void> {
  for (let first = 0; first < rounds; first += AT_ONCE) {
    const batch = Array.from({ length: Math.min(AT_ONCE, rounds - first) }, makeUpload)
    // 1 to 3 ms between pieces: the answer lands at a different point of the upload each time.
    const outcomes = await uploadWhileBusy(url, batch, 1 + ((first / AT_ONCE) % 3))
    outcomes.forEach((outcome, index) => {
      check(outcome, first + index)
    })
  }
}

async function countUsers(url: string): Promise<number> {
  const res = await fetch(`${url}/users?limit=100`, {
    headers: { authorization: `Bearer ${makeToken()}` },
  })
  assert.equal(res.status, 200)
  const page = (await res.json()) as { items: unknown[] }
  return page.items.length
}

describe('early answers that close the connection reach a client still sending its body', () => {
  let child: RunningChild
  let dir: string

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'lingering-close-'))
    child = await startChild({ dataDir: path.join(dir, 'data'), env: { LOG_LEVEL: 'warn' } })
  })
  after(async () => {
    await child.stop()
    await rm(dir, { recursive: true, force: true })
  })

  it(`answers 413 payload_too_large in each of ${ROUNDS} rounds of a 13 × 16 KiB chunked upload`, async () => {
    await uploadRounds(
      child.url,
      ROUNDS,
      () => ({
        head: postHead('transfer-encoding: chunked'),
        pieces: chunkedPieces(13),
      }),
      (outcome, round) => {
        const what = `chunked round ${round} (client error: ${outcome.error ?? 'none'})`
        assertClosingProblem(readAnswer(outcome.received), 413, 'payload_too_large', what)
        assert.equal(outcome.error, undefined, what)
      },
    )
    assert.equal(await countUsers(child.url), 0)
  })

  it(`answers 413 payload_too_large in each of ${ROUNDS} rounds of a Content-Length: 212992 upload`, async () => {
    const size = 13 * CHUNK
    assert.ok(size > MAX_BODY_BYTES)
    await uploadRounds(
      child.url,
      ROUNDS,
      () => ({
        head: postHead(`content-length: ${size}`),
        pieces: plainPieces(13),
      }),
      (outcome, round) => {
        const what = `content-length round ${round} (client error: ${outcome.error ?? 'none'})`
        assertClosingProblem(readAnswer(outcome.received), 413, 'payload_too_large', what)
        assert.equal(outcome.error, undefined, what)
      },
    )
    assert.equal(await countUsers(child.url), 0)
  })

  it('answers 401 token_missing, closing in stages, to uploads without a token', async () => {
    let round = 0
    await uploadRounds(
      child.url,
      10,
      () => {
        round += 1
        return round % 2 === 0
          ? {
              head: postHead('transfer-encoding: chunked', { auth: false }),
              pieces: chunkedPieces(13),
            }
          : {
              head: postHead(`content-length: ${13 * CHUNK}`, { auth: false }),
              pieces: plainPieces(13),
            }
      },
      (outcome, index) => {
        const what = `401 round ${index} (client error: ${outcome.error ?? 'none'})`
        assertClosingProblem(readAnswer(outcome.received), 401, 'token_missing', what)
        assert.equal(outcome.error, undefined, what)
      },
    )
    assert.equal(await countUsers(child.url), 0)
  })

  it('answers 415 unsupported_media_type, closing in stages, to uploads of another media type', async () => {
    let round = 0
    await uploadRounds(
      child.url,
      10,
      () => {
        round += 1
        const contentType = 'text/plain'
        return round % 2 === 0
          ? {
              head: postHead('transfer-encoding: chunked', { contentType }),
              pieces: chunkedPieces(13),
            }
          : {
              head: postHead(`content-length: ${13 * CHUNK}`, { contentType }),
              pieces: plainPieces(13),
            }
      },
      (outcome, index) => {
        const what = `415 round ${index} (client error: ${outcome.error ?? 'none'})`
        assertClosingProblem(readAnswer(outcome.received), 415, 'unsupported_media_type', what)
        assert.equal(outcome.error, undefined, what)
      },
    )
    assert.equal(await countUsers(child.url), 0)
  })

  it('answers 400 bad_request to a body the HTTP parser refuses while the rest is still coming', async () => {
    // A chunk size that is not hexadecimal: Node's parser fails on it, and the client sends on.
    const broken = Buffer.concat([Buffer.from('zz\r\n'), Buffer.alloc(CHUNK, 0x61)])
    await uploadRounds(
      child.url,
      10,
      () => ({
        head: postHead('transfer-encoding: chunked'),
        pieces: [broken, ...plainPieces(12)],
      }),
      (outcome, index) => {
        const what = `parser error round ${index} (client error: ${outcome.error ?? 'none'})`
        assertClosingProblem(readAnswer(outcome.received), 400, 'bad_request', what)
        assert.equal(outcome.error, undefined, what)
      },
    )
    assert.equal(await countUsers(child.url), 0)
  })
})

/** The service stops while a request is held in flight; a client then uploads on a busy connection. */
async function uploadWhileStopping(t: TestContext, finishEarly: boolean): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'lingering-close-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const child = await startChild({
    dataDir: path.join(dir, 'data'),
    env: { MAX_INFLIGHT: '1', LOG_LEVEL: 'warn' },
  })
  t.after(() => child.stop('SIGKILL'))
  // A request held in flight keeps the stopping service waiting, and answering.
  const held = holdRequest(child.url, {
    path: '/users',
    token: makeToken(),
    body: JSON.stringify({ email: 'held@example.com', name: 'Held' }),
  })
  t.after(() => {
    held.abort()
  })
  await waitFor(
    'the held request to be in flight',
    async () => {
      const res = await fetch(`${child.url}/users`, {
        headers: { authorization: `Bearer ${makeToken()}` },
      })
      await res.arrayBuffer()
      return res.status === 503 ? true : undefined
    },
    WAIT_MS,
  )
  // A connection busy with the start of a request is not idle: the stopping service keeps it.
  const socket = await connectTo(child.url)
  const seen = collect(socket)
  socket.write('GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\nPOST /users HTTP/1.1\r\n')
  await waitFor(
    'the health answer',
    () => (readAnswer(seen.received())?.status === 200 ? true : undefined),
    WAIT_MS,
  )
  const healthLength = seen.received().length
  child.proc.kill('SIGTERM')
  await waitFor(
    'the service to stop accepting connections',
    () =>
      new Promise<true | undefined>((resolve) => {
        const probe = connect(Number(new URL(child.url).port), '127.0.0.1')
        probe.once('connect', () => {
          probe.destroy()
          resolve(undefined)
        })
        probe.once('error', () => {
          resolve(true)
        })
      }),
    WAIT_MS,
  )
  // 40 pieces of 16 KiB, 2 ms apart: an upload that lasts well past the stop's next look at the
  // requests in flight, and stays under the byte bound.
  const pieces = 40
  const rest = head([
    'host: localhost',
    `authorization: Bearer ${makeToken()}`,
    'content-type: application/json',
    `content-length: ${pieces * CHUNK}`,
  ])
  // finishEarly: the request in flight ends (and with it the stop's wait) as the upload begins.
  writeWhileBusy([socket], [{ head: rest, pieces: plainPieces(pieces) }], 2, (piece) => {
    if (finishEarly && piece === 0) held.finish()
  })
  const outcome = await seen.outcome
  const what = `the 503 (client error: ${outcome.error ?? 'none'})`
  const answer = readAnswer(outcome.received.subarray(healthLength))
  assertClosingProblem(answer, 503, 'shutting_down', what)
  assert.match(answer?.headers.get('retry-after') ?? '', /^\d+$/)
  assert.equal(outcome.error, undefined, what)
  if (!finishEarly) held.finish()
  assert.equal((await held.response).status, 201)
  assert.deepEqual(await child.exited, { code: 0, signal: null })
}

describe('503 shutting_down to an upload still coming while the service stops', () => {
  it('reaches the client, and the request in flight still finishes', async (t) => {
    await uploadWhileStopping(t, false)
  })

  it('reaches the client when the last request in flight ends during the upload', async (t) => {
    await uploadWhileStopping(t, true)
  })
})

/** A raw client connection that reads as it goes; answers are taken off the stream one by one. */
class Conversation {
  readonly socket: Socket
  received: Buffer = Buffer.alloc(0)
  ended = false
  closed = false
  error: string | undefined
  readonly #waiters = new Set<() => void>()

  private constructor(socket: Socket) {
    this.socket = socket
    const wake = (): void => {
      for (const waiter of this.#waiters) waiter()
    }
    socket.on('data', (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk])
      wake()
    })
    socket.on('end', () => {
      this.ended = true
      wake()
    })
    socket.on('error', (caught: NodeJS.ErrnoException) => {
      this.error ??= caught.code ?? caught.message
    })
    socket.on('close', () => {
      this.closed = true
      wake()
    })
  }

  /** allowHalfOpen: the client keeps its side open (and may keep sending) after the server's FIN. */
  static async open(url: string, allowHalfOpen = false): Promise<Conversation> {
    const { hostname, port } = new URL(url)
    const socket = connect({ port: Number(port), host: hostname, allowHalfOpen })
    await once(socket, 'connect')
    return new Conversation(socket)
  }

  /** Resolves when `ready` holds, checked on every event of the socket; fails after WAIT_MS. */
  until<T>(ready: () => T | undefined, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const value = ready()
        if (value === undefined) return
        this.#waiters.delete(check)
        clearTimeout(timer)
        resolve(value)
      }
      const timer = setTimeout(() => {
        this.#waiters.delete(check)
        reject(
          new Error(
            `gave up waiting for ${what}; received: ${this.received.toString('latin1').slice(0, 500)}`,
          ),
        )
      }, WAIT_MS)
      this.#waiters.add(check)
      check()
    })
  }

  /** The next whole answer, taken off the received bytes. */
  async nextAnswer(): Promise<Answer> {
    const answer = await this.until(() => readAnswer(this.received), 'a whole answer')
    this.received = answer.rest
    return answer
  }

  whenClosed(): Promise<true> {
    return this.until(() => (this.closed ? true : undefined), 'the connection to close')
  }

  whenEnded(): Promise<true> {
    return this.until(
      () => (this.ended || this.closed ? true : undefined),
      'the server to end its side',
    )
  }
}

/** The server's side of the next connection that comes in. */
function nextServerSocket(s: TestService): Promise<Socket> {
  return new Promise((resolve) => {
    s.service.server.once('connection', resolve)
  })
}

function closedServerSocket(socket: Socket): Promise<void> {
  return socket.destroyed && socket.closed
    ? Promise.resolve()
    : once(socket, 'close').then(() => undefined)
}

describe('the bounds of closing in stages', () => {
  it(`cuts off a client that keeps sending after the answer, within ${LINGER_MS} ms and not before reading on`, async (t) => {
    const s = await startService(t)
    const serverSide = nextServerSocket(s)
    const client = await Conversation.open(s.url, true)
    const request = postHead('content-length: 104857600')
    client.socket.write(request)
    const answer = await client.nextAnswer()
    const answeredAt = performance.now()
    assertClosingProblem(answer, 413, 'payload_too_large', 'the 413')
    // About 40 KiB/s: far below the byte bound, so only the time bound can end it.
    const piece = Buffer.alloc(1024, 0x61)
    const sender = setInterval(() => {
      if (!client.closed) client.socket.write(piece)
    }, 25)
    t.after(() => {
      clearInterval(sender)
    })
    await client.whenEnded()
    await client.whenClosed()
    const elapsed = performance.now() - answeredAt
    clearInterval(sender)
    const server = await serverSide
    await closedServerSocket(server)
    // It read on (timers never fire early, so the lower bound cannot flake), and it did stop.
    assert.ok(elapsed >= LINGER_MS / 2, `closed after ${elapsed} ms: the server did not read on`)
    assert.ok(elapsed < LINGER_MS + 3000, `closed after ${elapsed} ms`)
    assert.ok(server.bytesRead > request.length, 'the server read what came after the answer')
    assert.ok(server.bytesRead < request.length + LINGER_BYTES)
    assert.deepEqual(await s.snapshot(), [])
  })

  it(`cuts off a client that sends more than ${LINGER_BYTES} bytes after the answer, having read about that much`, async (t) => {
    const s = await startService(t)
    const serverSide = nextServerSocket(s)
    const client = await Conversation.open(s.url, true)
    const request = postHead('content-length: 104857600')
    client.socket.write(request)
    assertClosingProblem(await client.nextAnswer(), 413, 'payload_too_large', 'the 413')
    // The body announced, as fast as the socket takes it, until the server cuts the connection.
    const piece = Buffer.alloc(64 * 1024, 0x61)
    const pump = (): void => {
      while (!client.socket.destroyed) {
        if (!client.socket.write(piece)) {
          client.socket.once('drain', pump)
          return
        }
      }
    }
    pump()
    await client.whenClosed()
    const server = await serverSide
    await closedServerSocket(server)
    const after = server.bytesRead - request.length
    assert.ok(
      after > LINGER_BYTES,
      `read ${after} bytes after the answer: it did not read on to the bound`,
    )
    // One read (64 KiB) past the bound at most, with room to spare; a clock-based check read
    // tens of MiB more here.
    assert.ok(after <= LINGER_BYTES + 256 * 1024, `read ${after} bytes after the answer`)
    assert.notEqual(client.error, undefined, 'the client was cut off while it still sent')
  })

  it('reads on after an answer given while Node held the unread body paused', async (t) => {
    const s = await startService(t)
    const serverSide = nextServerSocket(s)
    const client = await Conversation.open(s.url)
    // Sent at once and never read by the service (no token): Node's parser fills the body's
    // buffer and pauses the socket before the 401 goes out. Handed to the lingering close while
    // so paused, the socket read nothing more, and was destroyed at the time bound instead.
    const size = 384 * 1024
    const request = Buffer.concat([
      postHead(`content-length: ${size}`, { auth: false }),
      Buffer.alloc(size, 0x61),
    ])
    client.socket.write(request)
    assertClosingProblem(await client.nextAnswer(), 401, 'token_missing', 'the 401')
    await client.whenClosed()
    const server = await serverSide
    await closedServerSocket(server)
    assert.equal(server.bytesRead, request.length, 'the server read on to the end of the body')
    assert.equal(client.error, undefined)
    assert.deepEqual(await s.snapshot(), [])
  })

  it('lets a client that closes its side after the answer go at once', async (t) => {
    const s = await startService(t)
    const client = await Conversation.open(s.url)
    client.socket.write(postHead('content-length: 104857600'))
    assertClosingProblem(await client.nextAnswer(), 413, 'payload_too_large', 'the 413')
    const answeredAt = performance.now()
    // Without allowHalfOpen Node's client ends its side as soon as the server's FIN arrives.
    await client.whenClosed()
    const elapsed = performance.now() - answeredAt
    assert.ok(
      elapsed < LINGER_MS,
      `closed after ${elapsed} ms: the server waited for its time bound`,
    )
    assert.equal(client.error, undefined)
  })
})

describe('keep-alive where the body was fully read or empty', () => {
  it('answers a POST with a whole small body and a GET after it on the same connection', async (t) => {
    const s = await startService(t)
    const client = await Conversation.open(s.url)
    const body = JSON.stringify({ email: 'keep.alive@example.com', name: 'Keep Alive' })
    client.socket.write(
      Buffer.concat([postHead(`content-length: ${Buffer.byteLength(body)}`), Buffer.from(body)]),
    )
    const created = await client.nextAnswer()
    assert.equal(created.status, 201, created.text)
    assert.notEqual(created.headers.get('connection'), 'close')
    const id = (created.body as { id: string }).id
    client.socket.write(
      head([
        `GET /users/${id} HTTP/1.1`,
        'host: localhost',
        `authorization: Bearer ${makeToken()}`,
      ]),
    )
    const read = await client.nextAnswer()
    assert.equal(read.status, 200, read.text)
    assert.equal((read.body as { id: string }).id, id)
    assert.notEqual(read.headers.get('connection'), 'close')
    assert.equal(client.ended, false)
    client.socket.destroy()
  })

  it('keeps the connection after a 422 on a fully read body, and after a 400 on an empty one', async (t) => {
    const s = await startService(t)
    const client = await Conversation.open(s.url)
    const body = JSON.stringify({ email: 'not-an-email', name: 'Bad Email' })
    client.socket.write(
      Buffer.concat([postHead(`content-length: ${Buffer.byteLength(body)}`), Buffer.from(body)]),
    )
    const refused = await client.nextAnswer()
    assert.equal(refused.status, 422, refused.text)
    assert.equal((refused.body as { code: string }).code, 'validation_failed')
    assert.notEqual(refused.headers.get('connection'), 'close')
    client.socket.write(postHead('content-length: 0'))
    const empty = await client.nextAnswer()
    assert.equal(empty.status, 400, empty.text)
    assert.equal((empty.body as { code: string }).code, 'bad_request')
    assert.notEqual(empty.headers.get('connection'), 'close')
    client.socket.write(head(['GET /healthz HTTP/1.1', 'host: localhost']))
    assert.equal((await client.nextAnswer()).status, 200)
    assert.equal(client.ended, false)
    client.socket.destroy()
    assert.deepEqual(await s.snapshot(), [])
  })

  it('keeps the connection after a 401 to a request without a body', async (t) => {
    const s = await startService(t)
    const client = await Conversation.open(s.url)
    client.socket.write(postHead('content-length: 0', { auth: false }))
    const refused = await client.nextAnswer()
    assert.equal(refused.status, 401, refused.text)
    assert.equal((refused.body as { code: string }).code, 'token_missing')
    assert.notEqual(refused.headers.get('connection'), 'close')
    client.socket.write(head(['GET /users HTTP/1.1', 'host: localhost']))
    const listed = await client.nextAnswer()
    assert.equal(listed.status, 401, listed.text)
    assert.notEqual(listed.headers.get('connection'), 'close')
    client.socket.write(head(['GET /healthz HTTP/1.1', 'host: localhost']))
    assert.equal((await client.nextAnswer()).status, 200)
    assert.equal(client.ended, false)
    client.socket.destroy()
    assert.deepEqual(await s.snapshot(), [])
  })
})

describe('a request pipelined behind an early answer that closes', () => {
  /** maxInflight 1: a request counted in and never out would make /readyz and every write 503. */
  async function assertStillServing(s: TestService): Promise<void> {
    const ready = await fetch(`${s.url}/readyz`)
    assert.equal(ready.status, 200, await ready.text())
    const created = await s.call('POST', '/users', {
      json: { email: 'after.pipeline@example.com', name: 'After' },
    })
    assert.equal(created.status, 201, created.text)
  }

  it('is not answered after a 413, which closes even when the whole oversized body has arrived', async (t) => {
    const s = await startService(t, { maxInflight: 1 })
    const client = await Conversation.open(s.url)
    const size = MAX_BODY_BYTES + 1
    client.socket.write(
      Buffer.concat([
        postHead(`content-length: ${size}`),
        Buffer.alloc(size, 0x61),
        head(['GET /healthz HTTP/1.1', 'host: localhost']),
      ]),
    )
    assertClosingProblem(await client.nextAnswer(), 413, 'payload_too_large', 'the 413')
    await client.whenClosed()
    assert.equal(
      client.received.length,
      0,
      `an answer to the pipelined request: ${client.received.toString('latin1')}`,
    )
    assert.equal(client.error, undefined)
    await assertStillServing(s)
  })

  it('is not answered after a chunked 413 whose last chunk has arrived', async (t) => {
    const s = await startService(t, { maxInflight: 1 })
    const client = await Conversation.open(s.url)
    client.socket.write(
      Buffer.concat([
        postHead('transfer-encoding: chunked'),
        ...chunkedPieces(5),
        head(['GET /healthz HTTP/1.1', 'host: localhost']),
      ]),
    )
    assertClosingProblem(await client.nextAnswer(), 413, 'payload_too_large', 'the 413')
    await client.whenClosed()
    assert.equal(
      client.received.length,
      0,
      `an answer to the pipelined request: ${client.received.toString('latin1')}`,
    )
    await assertStillServing(s)
  })

  it('is not answered after a 401 given while the body was still coming', async (t) => {
    const s = await startService(t, { maxInflight: 1 })
    const client = await Conversation.open(s.url)
    const size = 13 * CHUNK
    client.socket.write(
      Buffer.concat([
        postHead(`content-length: ${size}`, { auth: false }),
        Buffer.alloc(size, 0x61),
        postHead('content-length: 2'),
        Buffer.from('{}'),
      ]),
    )
    assertClosingProblem(await client.nextAnswer(), 401, 'token_missing', 'the 401')
    await client.whenClosed()
    assert.equal(
      client.received.length,
      0,
      `an answer to the pipelined request: ${client.received.toString('latin1')}`,
    )
    assert.deepEqual(await s.snapshot(), [])
    await assertStillServing(s)
  })
})
