import type { IncomingMessage } from 'node:http'

import { repeatedName, repeatedNameDetail } from '../domain/json-text.js'
import { keepKeyOrder } from '../domain/metadata.js'
import { splitOutsideQuotes, unquote } from './field-values.js'
import { HttpError } from './problem.js'
import { hasTimedOut } from './request-timeout.js'
import type { BodyRule } from './route-spec.js'

export const MAX_BODY_BYTES = 64 * 1024
/** A chunked body's first buffer; it doubles as the body grows, up to the limit. */
const INITIAL_BODY_BYTES = 16 * 1024

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** True when the request announces a body (a non-zero Content-Length, or chunked transfer). */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  // RFC 9110 §8.6: 1*DIGIT, so `00` is no body either (Node's parser let only digits through).
  if (length !== undefined) return !/^0+$/.test(length)
  return req.headers['transfer-encoding'] !== undefined
}

/** True when part of an announced body has not arrived yet: answering now must close the connection. */
export function isBodyPending(req: IncomingMessage): boolean {
  return !req.complete && hasBody(req)
}

/** The client went away before its request body ended: not a fault of the service (logged as 499). */
export class ClientClosedError extends Error {
  override name = 'ClientClosedError'
}

/** The refusal of a chunked body without a Content-Type, told at its first byte (readBody). */
const untypedRefusals = new WeakMap<IncomingMessage, HttpError>()

/**
 * Refuses a request whose Content-Type the route does not take, before any byte is read: another
 * media type, a charset other than UTF-8, or a body sent without a Content-Type. A chunked body
 * announces no length and may turn out empty, which is no body, as with `Content-Length: 0` (an
 * action takes an empty body): when `readBody` reads it (`deferUntyped`), one without a
 * Content-Type is refused at its first byte instead.
 */
export function validateContentType(
  req: IncomingMessage,
  mediaTypes: readonly string[],
  deferUntyped = false,
): void {
  // RFC 9110 §15.5.16: a body in a content coding the server does not take is a 415 that says,
  // with Accept-Encoding, which codings it takes. A compressed body read as JSON would be a
  // confusing 400, and one that merely claims a coding would be taken as something it says it is not.
  if (hasBody(req) && !isIdentity(req.headers['content-encoding'])) {
    throw unsupported(
      'A request body must not have a content coding (Content-Encoding).',
      req,
      mediaTypes,
      { 'accept-encoding': 'identity' },
    )
  }
  const header = req.headers['content-type']
  if (header === undefined) {
    if (!hasBody(req)) return
    const refusal = unsupported('A request body needs a Content-Type.', req, mediaTypes)
    if (!deferUntyped || req.headers['content-length'] !== undefined) throw refusal
    untypedRefusals.set(req, refusal)
    return
  }
  const [type = '', ...params] = splitOutsideQuotes(header, ';')
  if (!mediaTypes.includes(type.trim().toLowerCase())) {
    throw unsupported(`The Content-Type ${type.trim()} is not taken here.`, req, mediaTypes)
  }
  for (const param of params) {
    const equals = param.indexOf('=')
    const name = equals === -1 ? param : param.slice(0, equals)
    const value = equals === -1 ? '' : unquote(param.slice(equals + 1).trim())
    if (name.trim().toLowerCase() === 'charset' && value.toLowerCase() !== 'utf-8') {
      throw unsupported('Request bodies must be UTF-8.', req, mediaTypes)
    }
  }
}

/** No Content-Encoding, or only `identity` (RFC 9110 §8.4.1: the codings are listed in order). */
function isIdentity(header: string | undefined): boolean {
  if (header === undefined) return true
  return header.split(',').every((coding) => {
    const name = coding.trim().toLowerCase()
    return name === '' || name === 'identity'
  })
}

function unsupported(
  detail: string,
  req: IncomingMessage,
  mediaTypes: readonly string[],
  extra: Readonly<Record<string, string>> = {},
): HttpError {
  // RFC 5789 §2.2: a refused PATCH says which patch formats are taken.
  const patch = req.method === 'PATCH' ? { 'accept-patch': mediaTypes.join(', ') } : {}
  const headers = { ...patch, ...extra }
  return new HttpError('unsupported_media_type', `${detail} Send ${mediaTypes.join(' or ')}.`, {
    ...(Object.keys(headers).length === 0 ? {} : { headers }),
  })
}

/**
 * Reads the body up to `limit` bytes. A larger body is refused as soon as it is announced or seen,
 * without reading the rest.
 */
export function readBody(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<Buffer> {
  try {
    refuseAnnouncedTooLarge(req, limit)
  } catch (error) {
    return Promise.reject(error)
  }
  // Read after a wait (a key's hold, a subject's lookup in the database): a client that left
  // meanwhile has closed the request already, and it will not say so again.
  if (req.destroyed) {
    return Promise.reject(new ClientClosedError('the client closed the request before it was read'))
  }
  const untyped = untypedRefusals.get(req)
  return new Promise((resolve, reject) => {
    // Chunks are copied into one buffer as they come: a body sent a byte at a time would
    // otherwise be held as one Buffer per byte, some 270 bytes each (17 MB for 64 KiB).
    const length = req.headers['content-length']
    const announced = length === undefined ? INITIAL_BODY_BYTES : Number(length)
    let body = Buffer.allocUnsafe(Math.min(limit, announced))
    let size = 0
    const onData = (chunk: Buffer): void => {
      // A body without a Content-Type: refused at its first byte, the rest read and discarded.
      if (untyped !== undefined && chunk.length > 0) {
        cleanup()
        reject(untyped)
        return
      }
      if (size + chunk.length > limit) {
        // Stop collecting; the rest is read and discarded while the connection closes in stages.
        cleanup()
        reject(tooLarge(limit))
        return
      }
      if (size + chunk.length > body.length) {
        const grown = Buffer.allocUnsafe(
          Math.min(limit, Math.max(body.length * 2, size + chunk.length)),
        )
        body.copy(grown, 0, 0, size)
        body = grown
      }
      chunk.copy(body, size)
      size += chunk.length
    }
    const onEnd = (): void => {
      cleanup()
      if (hasTimedOut(req)) {
        reject(new ClientClosedError('the request was answered 408 before its body ended'))
        return
      }
      resolve(body.subarray(0, size))
    }
    const onError = (error: Error): void => {
      cleanup()
      reject(
        new ClientClosedError('the client closed the request before its body ended', {
          cause: error,
        }),
      )
    }
    const onClose = (): void => {
      cleanup()
      reject(new ClientClosedError('the client closed the request before its body ended'))
    }
    const cleanup = (): void => {
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('close', onClose)
    }
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onError)
    req.on('close', onClose)
  })
}

/** A 413 for a body announced (Content-Length) larger than `limit`, before anything is read. */
export function refuseAnnouncedTooLarge(req: IncomingMessage, limit = MAX_BODY_BYTES): void {
  const announced = Number(req.headers['content-length'] ?? 0)
  if (announced > limit) throw tooLarge(limit)
}

function tooLarge(limit: number): HttpError {
  return new HttpError('payload_too_large', `The request body is larger than ${limit} bytes.`)
}

/**
 * Parses a body as JSON: an empty body is undefined when the route allows one and a 400 when it
 * needs one; bytes that are not UTF-8 JSON are a 400.
 */
export function parseJsonBody(bytes: Buffer, rule: BodyRule): unknown {
  if (bytes.length === 0) {
    if (rule === 'required') throw new HttpError('bad_request', 'This request needs a JSON body.')
    return undefined
  }
  let text: string
  let value: unknown
  try {
    text = utf8.decode(bytes)
    value = JSON.parse(text)
  } catch {
    throw new HttpError('bad_request', 'The request body is not valid JSON.')
  }
  const repeated = repeatedName(text)
  if (repeated !== undefined) throw new HttpError('bad_request', repeatedNameDetail(repeated))
  // A user's metadata keeps the order it was sent in, which JSON.parse loses for index-like keys.
  keepKeyOrder(text, value, ['metadata'])
  return value
}
