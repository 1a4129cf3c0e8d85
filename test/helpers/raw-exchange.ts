import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'

import type { Problem } from './http.js'

/** What came back on a raw connection, and whether and when the server closed it. */
export interface Exchange {
  /** Every byte received, as latin1 text. */
  readonly raw: string
  /** The first response in `raw`, when a whole one arrived. */
  readonly response: RawResponse | undefined
  /** True when the server ended or reset the connection before the wait ran out. */
  readonly closed: boolean
  /** Milliseconds from the connection to the close (or to the end of the wait). */
  readonly elapsedMs: number
}

export interface RawResponse {
  readonly status: number
  /** Header names in lower case. */
  readonly headers: ReadonlyMap<string, string>
  readonly text: string
  /** The parsed body when it is JSON. */
  readonly body: unknown
}

/** Resolves once the socket is connected. */
export function openSocket(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname)
    socket.once('connect', () => {
      socket.off('error', reject)
      resolve(socket)
    })
    socket.once('error', reject)
  })
}

export interface ExchangeOptions {
  /** How long to wait for the close (default 5 s). */
  waitMs?: number
  /** Writes at its own pace once connected; returns what stops it. */
  drive?: (socket: Socket) => () => void
  /** Stop at the first whole response instead of waiting for the close. */
  untilResponse?: boolean
}

/**
 * Writes `bytes` (or lets `drive` write at its own pace) on a new connection, then collects what
 * the server sends until it closes the connection, or `waitMs` passes. The client never closes
 * first: the point is to see what the server does.
 */
export async function exchange(
  url: string,
  bytes: string | Buffer | undefined,
  options: ExchangeOptions = {},
): Promise<Exchange> {
  const socket = await openSocket(url)
  const started = Date.now()
  const chunks: Buffer[] = []
  const stop = options.drive?.(socket)
  if (bytes !== undefined)
    socket.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes)
  const closed = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => {
      resolve(false)
    }, options.waitMs ?? 5000)
    let settled = false
    const done = (): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(!socket.readable || socket.readableEnded || socket.destroyed)
    }
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      if (
        options.untilResponse === true &&
        parseRawResponse(Buffer.concat(chunks).toString('latin1')) !== undefined
      )
        done()
    })
    socket.once('end', done)
    socket.once('close', done)
    // A reset after the answer is a close too; the bytes already read are kept.
    socket.on('error', () => undefined)
  })
  const elapsedMs = Date.now() - started
  stop?.()
  socket.destroy()
  const raw = Buffer.concat(chunks).toString('latin1')
  return { raw, response: parseRawResponse(raw), closed, elapsedMs }
}

/** The first HTTP/1.1 response in `raw` (bodies framed by Content-Length only). */
export function parseRawResponse(raw: string): RawResponse | undefined {
  const end = raw.indexOf('\r\n\r\n')
  if (end === -1) return undefined
  const [statusLine = '', ...lines] = raw.slice(0, end).split('\r\n')
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? Number.NaN)
  const headers = new Map<string, string>()
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim())
  }
  const length = Number(headers.get('content-length') ?? 0)
  const bodyBytes = Buffer.from(raw.slice(end + 4), 'latin1')
  if (bodyBytes.length < length) return undefined
  const text = bodyBytes.subarray(0, length).toString('utf8')
  const body: unknown =
    text !== '' && /json/.test(headers.get('content-type') ?? '') ? JSON.parse(text) : undefined
  return { status, headers, text, body }
}

/** Resolves true once the socket closes, false if `timeoutMs` passes first. */
export function waitForClose(socket: Socket, timeoutMs: number): Promise<boolean> {
  if (socket.destroyed) return Promise.resolve(true)
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      resolve(false)
    }, timeoutMs)
    socket.on('error', () => undefined)
    socket.once('close', () => {
      clearTimeout(timer)
      resolve(true)
    })
  })
}

/**
 * A raw `POST /users` of a new user named `name`, its head made of `lines` (Host, Authorization,
 * Content-Type…, exactly as given, repeated lines included) and the body's Content-Length.
 */
export function rawCreate(lines: readonly string[], name: string, email: string): string {
  const body = JSON.stringify({ email, name })
  return [
    'POST /users HTTP/1.1',
    ...lines,
    `Content-Length: ${Buffer.byteLength(body)}`,
    '',
    body,
  ].join('\r\n')
}

/** Asserts a problem+json answer with the status and code, X-Request-Id, Connection: close, then a close. */
export function assertClosingProblem(result: Exchange, status: number, code: string): Problem {
  const res = result.response
  assert.ok(res !== undefined, `no whole response: ${JSON.stringify(result.raw)}`)
  assert.equal(res.status, status, result.raw)
  assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/)
  assert.equal(res.headers.get('connection'), 'close')
  assert.equal(res.headers.get('cache-control'), 'no-store')
  // RFC 9110 §6.6.1, also on the answers written on the socket itself.
  assert.match(
    res.headers.get('date') ?? '',
    /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} [\d:]{8} GMT$/,
  )
  const problem = res.body as Problem
  assert.equal(problem.code, code, res.text)
  assert.equal(problem.status, status)
  for (const member of ['type', 'title', 'detail', 'requestId'] as const)
    assert.equal(typeof problem[member], 'string', res.text)
  assert.match(res.headers.get('x-request-id') ?? '', /^[A-Za-z0-9._-]{1,128}$/)
  assert.equal(problem.requestId, res.headers.get('x-request-id'))
  assert.ok(result.closed, 'the server closed the connection')
  return problem
}
