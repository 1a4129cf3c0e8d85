import { createHash } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

import type { TokenClaims } from './auth/verify-token.js'
import type { KeptAnswer, KeptKey, PendingKey } from './domain/kept-key.js'
import { ClientClosedError, parseJsonBody, readBody, refuseAnnouncedTooLarge } from './http/body.js'
import { readIdempotencyKey } from './http/idempotency-key.js'
import { HttpError, toHttpError } from './http/problem.js'
import { DEFAULT_CONTENT_TYPE, type Reply } from './http/respond.js'
import type { Logger } from './log/logger.js'
import type { RequestState } from './request-state.js'
import { type Answer, type Route, STREAMED } from './routes/route.js'
import type { KeptKeys } from './store/kept-keys.js'

export interface RequestKeysOptions {
  readonly keys: KeptKeys
  /** How long a kept key lives after its answer, in seconds. */
  readonly ttlSeconds: number
  readonly now: () => number
  readonly logger: Logger
  /**
   * Throws to refuse a key kept alone, as a change is refused (maintenance): that key is a write
   * too, of a file in the data directory.
   */
  readonly writeGate?: (() => void) | undefined
}

/**
 * A kept key lives this much past its time to live: its expiry is set as its change commits, a
 * little before the answer leaves, and it must not be forgotten before the time promised.
 */
const EXPIRY_MARGIN_MS = 1000

const REPLAYED = { 'idempotent-replayed': 'true' } as const

/**
 * The `Idempotency-Key`s of the requests in flight in this process (docs/api.md, safe retries):
 * a key is held from the moment its request's headers are in until its answer is sent, and a
 * second request with the same subject and key meanwhile is refused at once (409).
 */
export class RequestKeys {
  readonly #held = new Set<string>()
  readonly #options: RequestKeysOptions

  constructor(options: RequestKeysOptions) {
    this.#options = options
  }

  /**
   * Reads the request's key and holds it: undefined when it has none; a 400 for a malformed one, a
   * 409 while another request of this subject holds it here.
   */
  hold(header: string | string[] | undefined, subject: string): HeldKey | undefined {
    const key = readIdempotencyKey(header)
    if (key === undefined) return undefined
    const name = `${subject}\u0000${key}`
    if (this.#held.has(name)) throw inUse()
    this.#held.add(name)
    return new HeldKey(subject, key, this.#options, () => {
      this.#held.delete(name)
    })
  }
}

/** One request's key, from its headers until its answer is sent. */
export class HeldKey implements PendingKey {
  readonly subject: string
  readonly key: string
  readonly #options: RequestKeysOptions
  readonly #free: () => void
  #fingerprint = ''
  #heldInStore = false
  /** `keep` was called: the store writes the key with the change, if the change commits. */
  #handedOver = false
  /** The request succeeded and its key is stored. */
  #kept = false
  #ended = false

  constructor(subject: string, key: string, options: RequestKeysOptions, free: () => void) {
    this.subject = subject
    this.key = key
    this.#options = options
    this.#free = free
  }

  /**
   * Holds the key against the other processes that share the store (the replicas of one
   * database), before the body is read: a 409 while one of them holds it.
   */
  async holdInStore(): Promise<void> {
    if ((await this.#options.keys.hold(this.subject, this.key)) === 'in_use') throw inUse()
    this.#heldInStore = true
    // The request ended while its hold was being taken (a 408 while the store was slow): nobody
    // ends it again, and the store would renew the hold for as long as the process lives.
    if (this.#ended) {
      await this.#release()
      throw new ClientClosedError('the request ended while its key was being held')
    }
  }

  /**
   * Once the body is in: a kept key answers the replay of its answer for the same request (method,
   * path as sent and body bytes) or a 422 for another; undefined when the key is free and the
   * request runs.
   */
  async claim(method: string, path: string, body: Buffer): Promise<Reply | undefined> {
    const { keys } = this.#options
    this.#fingerprint = fingerprintOf(method, path, body)
    const kept = await keys.find(this.subject, this.key)
    if (kept === undefined) return undefined
    if (kept.fingerprint !== this.#fingerprint) {
      throw new HttpError(
        'idempotency_key_reused',
        'This Idempotency-Key was sent with another request (method, path or body); nothing was done. Use a new key for a new request.',
      )
    }
    return replayOf(kept.answer)
  }

  /** The kept key of this request's answer; the store keeps it with the change it makes. */
  keep(answer: KeptAnswer): KeptKey {
    this.#handedOver = true
    const { now, ttlSeconds } = this.#options
    return {
      subject: this.subject,
      key: this.key,
      fingerprint: this.#fingerprint,
      answer: keptPart(answer),
      expiresAt: now() + ttlSeconds * 1000 + EXPIRY_MARGIN_MS,
    }
  }

  /**
   * After the handler: a success whose store kept no key (it changed nothing) keeps it alone,
   * durably, before it is answered.
   */
  async settle(reply: Reply): Promise<void> {
    if (reply.status < 200 || reply.status > 299) return
    if (!this.#handedOver) {
      this.#options.writeGate?.()
      await this.#options.keys.keepAlone(this.keep(reply))
    }
    this.#kept = true
  }

  /**
   * The request ended (answered, refused or gone): the key is free again unless it was kept. A
   * change that failed after its key was handed to the store gives its hold back too (the store
   * keeps a key only with a change that committed, and never releases a kept one).
   */
  end(): Promise<void> {
    if (this.#ended) return DONE
    this.#ended = true
    this.#free()
    if (!this.#heldInStore || this.#kept) return DONE
    return this.#release()
  }

  /** Gives the store's hold back; a failure is logged (the hold then lapses with its lease). */
  #release(): Promise<void> {
    return this.#options.keys.release(this.subject, this.key).catch((error: unknown) => {
      this.#options.logger.warn('could not release an Idempotency-Key', { error: String(error) })
    })
  }
}

const DONE: Promise<void> = Promise.resolve()

const NO_BYTES: Buffer = Buffer.alloc(0)

/**
 * Holds the request's key from now until its answer is sent, on a route that takes one: after
 * the checks that refuse a request before it may hold a key (415, an announced 413), before its
 * body is read. Undefined for a route without keys or a request without one.
 */
export function holdRequestKey(
  keys: RequestKeys,
  req: IncomingMessage,
  state: RequestState,
  route: Route,
  claims: TokenClaims | undefined,
): HeldKey | undefined {
  const header = req.headersDistinct['idempotency-key']
  if (route.idempotencyKey !== true || claims === undefined || header === undefined)
    return undefined
  // A keyed request's body is read for its fingerprint, DELETE's too; a keyless DELETE's is not.
  refuseAnnouncedTooLarge(req)
  const held = keys.hold(header, claims.sub)
  if (held !== undefined) state.held = held
  return held
}

/**
 * A request with a key: held against the other processes sharing the store too, before its body
 * is read; then the replay of its kept answer, or the handler (`run`, given the parsed body) and
 * its answer kept.
 */
export async function serveKeyed(
  req: IncomingMessage,
  state: RequestState,
  route: Route,
  held: HeldKey,
  run: (body: unknown) => Answer | Promise<Answer>,
): Promise<Answer> {
  await held.holdInStore()
  try {
    let bytes: Buffer = NO_BYTES
    let body: unknown
    if (route.body !== 'stream') {
      // A route that takes no body (DELETE) ignores one, but its bytes are the request's: another
      // body with the same key is another request (422), as on the routes that read theirs.
      bytes = await readBody(req)
      if (route.body !== 'none') body = parseJsonBody(bytes, route.body)
    }
    const replay = await held.claim(req.method ?? 'POST', state.path, bytes)
    if (replay !== undefined) return replay
    const answered = await run(body)
    if (answered !== STREAMED) await held.settle(answered)
    return answered
  } catch (error) {
    // A refused request's key is free before its refusal leaves: the corrected request may follow
    // at once, to any replica. Not a 5xx, whose cause may be the store itself: its hold is given
    // back as it is answered (or lapses with its lease), never holding the answer back.
    if (toHttpError(error).status < 500) await held.end()
    throw error
  }
}

/** Method, path as sent and body bytes, hashed: what a kept key must be sent with again. */
function fingerprintOf(method: string, path: string, body: Buffer): string {
  return createHash('sha256').update(`${method} ${path}\n`).update(body).digest('hex')
}

/** What is kept of an answer: its status, body and the headers that describe it. */
function keptPart(answer: KeptAnswer): KeptAnswer {
  const location = answer.headers?.location
  return {
    status: answer.status,
    ...(answer.body === undefined ? {} : { body: answer.body }),
    // The type it was sent with, written out: a later default must not change a replay.
    ...(answer.body === undefined
      ? {}
      : { contentType: answer.contentType ?? DEFAULT_CONTENT_TYPE }),
    ...(answer.etag === undefined ? {} : { etag: answer.etag }),
    ...(location === undefined ? {} : { headers: { location } }),
  }
}

function replayOf(answer: KeptAnswer): Reply {
  return { ...answer, headers: { ...answer.headers, ...REPLAYED } }
}

function inUse(): HttpError {
  return new HttpError(
    'idempotency_key_in_use',
    'A request with this Idempotency-Key is in flight; try again when it has been answered.',
    { headers: { 'retry-after': '1' } },
  )
}
