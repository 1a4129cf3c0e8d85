/**
 * One webhook attempt: one POST with node:http or node:https to an address the policy allows,
 * within WEBHOOK_TIMEOUT_MS up to the answer's headers, then at most 1 s and 1 KiB of its body
 * before the connection is closed, so that a receiver cannot make the service read or wait for
 * more. Redirects are never followed (a 3xx fails the attempt like any other status).
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http'
import { performance } from 'node:perf_hooks'
import type { Duplex } from 'node:stream'

import type { DeliveryError } from '../domain/webhook.js'
import { type AllowList, isRefusedAddress } from './address-policy.js'
import { createCheckedLookup, type LookupState } from './checked-lookup.js'
import { parseRetryAfter } from './retry-schedule.js'

/** How long the body of an answer is read, and how much of it is kept. */
export const BODY_READ_MS = 1000
export const BODY_KEPT_BYTES = 1024

export interface AttemptRequest {
  readonly url: string
  /** The webhook-id, webhook-timestamp and webhook-signature headers. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

export interface AttemptOptions {
  readonly allow: AllowList
  readonly timeoutMs: number
  /** Kept-alive connections to the endpoint (createEndpointAgent); none: one per attempt. */
  readonly agent?: HttpAgent | undefined
  /** Abandons the attempt at once (the service closing): its outcome is not to be logged. */
  readonly signal?: AbortSignal | undefined
}

/** What an attempt came to, as its delivery log entry says it. */
export interface AttemptOutcome {
  readonly result: 'succeeded' | 'failed'
  /** The answer's status, or null when none came. */
  readonly responseStatus: number | null
  readonly error: DeliveryError | null
  /** The first 1 KiB of the answer's body as text (invalid UTF-8 replaced), "" when none. */
  readonly response: string
  readonly durationMs: number
  /** A 429's or 503's `Retry-After`, in seconds. */
  readonly retryAfterSeconds?: number
  /**
   * Why TLS failed, as OpenSSL or Node names it (`DEPTH_ZERO_SELF_SIGNED_CERT`,
   * `ERR_TLS_CERT_ALTNAME_INVALID`), for the warn line: the log's error stays connection_failed.
   */
  readonly tlsReason?: string
}

/** The error codes of a failed TLS handshake or certificate check: constant names, no secrets. */
const TLS_REASON = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)[A-Z0-9_]*$/

type HttpsModule = typeof import('node:https')
let https: Promise<HttpsModule> | undefined

/**
 * node:https (and TLS under it) is loaded at the first https endpoint: a service that delivers to
 * none, or only over http, does not carry it in memory.
 */
function loadHttps(): Promise<HttpsModule> {
  https ??= import('node:https')
  return https
}

/** Connections kept alive between the attempts to one endpoint, one at a time. */
export async function createEndpointAgent(url: string): Promise<HttpAgent> {
  const options = { keepAlive: true, maxSockets: 1 }
  if (new URL(url).protocol !== 'https:') return new HttpAgent(options)
  return new (await loadHttps()).Agent(options)
}

/** Makes one attempt; never rejects. */
export async function sendAttempt(
  request: AttemptRequest,
  options: AttemptOptions,
): Promise<AttemptOutcome> {
  const secure = new URL(request.url).protocol === 'https:'
  const send = secure ? (await loadHttps()).request : httpRequest
  return attemptWith(send, request, options)
}

function attemptWith(
  send: typeof httpRequest,
  request: AttemptRequest,
  options: AttemptOptions,
): Promise<AttemptOutcome> {
  const started = performance.now()
  return new Promise((resolve) => {
    let settled = false
    let timer: NodeJS.Timeout | undefined
    // Ends the host's resolution with the attempt, so that a DNS that never answers holds nothing.
    const resolution = new AbortController()
    const finish = (outcome: Omit<AttemptOutcome, 'durationMs'>): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolution.abort()
      options.signal?.removeEventListener('abort', abandon)
      resolve({ ...outcome, durationMs: Math.round(performance.now() - started) })
    }
    const failed = (error: DeliveryError, tlsReason?: string): void => {
      const outcome = { result: 'failed', responseStatus: null, error, response: '' } as const
      finish(tlsReason === undefined ? outcome : { ...outcome, tlsReason })
    }
    const url = new URL(request.url)
    const literal = literalAddress(url)
    if (literal !== undefined && isRefusedAddress(literal, options.allow)) {
      failed('private_address')
      return
    }
    if (options.signal?.aborted === true) {
      failed('connection_failed')
      return
    }
    const state: LookupState = { outcome: 'pending' }
    const req = send(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': String(request.body.byteLength),
        ...request.headers,
      },
      lookup: createCheckedLookup(options.allow, state, resolution.signal),
      agent: options.agent ?? false,
    })
    let timedOut = false
    let answered = false
    timer = setTimeout(() => {
      timedOut = true
      req.destroy()
    }, options.timeoutMs)
    function abandon(): void {
      req.destroy()
      failed('connection_failed')
    }
    options.signal?.addEventListener('abort', abandon, { once: true })
    req.on('error', (error: NodeJS.ErrnoException) => {
      // After the headers, the body's own reading decides (a cut body is still an answer).
      if (answered) return
      if (timedOut) failed('timeout')
      else if (state.outcome === 'dns_failed' || state.outcome === 'private_address')
        failed(state.outcome)
      else failed('connection_failed', tlsReasonOf(error))
    })
    // A 101 is not a 2xx: it fails the attempt like any other status. Node hands it to 'upgrade',
    // not 'response', and without a listener closes the socket and emits no error, so that the
    // attempt would never end and its endpoint would wait for ever.
    req.on('upgrade', (res: IncomingMessage, socket: Duplex) => {
      answered = true
      socket.destroy()
      const status = res.statusCode ?? 101
      finish({ result: 'failed', responseStatus: status, error: 'status', response: '' })
    })
    // Any other way the request could end without an answer or an error ends the attempt too.
    req.on('close', () => {
      if (!answered) failed(timedOut ? 'timeout' : 'connection_failed')
    })
    req.on('response', (res) => {
      answered = true
      clearTimeout(timer)
      const status = res.statusCode ?? 0
      const retryAfter = parseRetryAfter(status, headerOf(res, 'retry-after'))
      void readBody(res).then((response) => {
        const succeeded = status >= 200 && status <= 299
        finish({
          result: succeeded ? 'succeeded' : 'failed',
          responseStatus: status,
          error: succeeded ? null : 'status',
          response,
          ...(retryAfter === undefined ? {} : { retryAfterSeconds: retryAfter }),
        })
      })
    })
    req.end(request.body)
  })
}

/** The address a URL names literally (IPv6 without its brackets), or undefined for a name. */
function literalAddress(url: URL): string | undefined {
  const host = url.hostname
  if (host.startsWith('[')) return host.slice(1, -1)
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(host) ? host : undefined
}

function tlsReasonOf(error: NodeJS.ErrnoException): string | undefined {
  const { code } = error
  return typeof code === 'string' && TLS_REASON.test(code) ? code : undefined
}

function headerOf(res: IncomingMessage, name: string): string | undefined {
  const value = res.headers[name]
  return Array.isArray(value) ? value[0] : value
}

/**
 * At most BODY_KEPT_BYTES of the body within BODY_READ_MS; the connection is closed unless the
 * body ended within both (then a kept-alive connection may serve the next attempt).
 */
function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let size = 0
    let done = false
    const stop = (ended: boolean): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      if (!ended) res.destroy()
      const kept = Buffer.concat(chunks).subarray(0, BODY_KEPT_BYTES)
      // A body cut here may end inside a character: streaming leaves that part out, rather than
      // replacing it and making the text longer than 1 KiB. A body that ended is decoded whole.
      resolve(new TextDecoder('utf-8').decode(kept, { stream: !ended }))
    }
    const timer = setTimeout(() => stop(false), BODY_READ_MS)
    res.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      size += chunk.length
      if (size >= BODY_KEPT_BYTES) stop(false)
    })
    res.on('end', () => stop(true))
    res.on('error', () => stop(false))
    res.on('close', () => stop(false))
  })
}
