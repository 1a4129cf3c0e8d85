import type { ServerResponse } from 'node:http'

import { type HttpError, problemExtras } from './problem.js'

/** What a handler answers: a status, JSON text (already serialised) and extra headers. */
export interface Reply {
  readonly status: number
  readonly body?: string
  readonly contentType?: string
  /** The ETag, sent before `headers`: a field of its own, so that a read builds no header object. */
  readonly etag?: string
  readonly headers?: Readonly<Record<string, string>>
}

/** The type of a body whose reply names none. */
export const DEFAULT_CONTENT_TYPE = 'application/json'

export const PROBLEM_TYPE_PREFIX = 'urn:user-service:problem:'

/** How an answer may be cached: successful reads of users privately with revalidation, else never. */
export type CachePolicy = 'private' | 'no-store'

const NO_HEADERS: readonly string[] = []

/**
 * Writes a reply with one writeHead call and a flat header list (Node's cheapest path); HEAD and
 * bodiless statuses get the headers alone (Node drops the body of a HEAD).
 */
export function sendReply(
  res: ServerResponse,
  reply: Reply,
  requestId: string,
  cache: CachePolicy,
  closeConnection = false,
  cors: readonly string[] = NO_HEADERS,
): void {
  const headers: (string | number)[] =
    cache === 'private'
      ? ['x-request-id', requestId, 'cache-control', 'private, no-cache', 'vary', 'Authorization']
      : ['x-request-id', requestId, 'cache-control', 'no-store']
  if (closeConnection) headers.push('connection', 'close')
  // CORS headers (see cors.ts) are a flat name/value list; a second Vary line adds to the first.
  for (const item of cors) headers.push(item)
  if (reply.etag !== undefined) headers.push('etag', reply.etag)
  const extra = reply.headers
  if (extra !== undefined) {
    for (const name in extra) {
      const value = extra[name]
      if (value !== undefined) headers.push(name, value)
    }
  }
  if (reply.body === undefined || reply.status === 204 || reply.status === 304) {
    res.writeHead(reply.status, headers)
    res.end()
    return
  }
  headers.push(
    'content-type',
    reply.contentType ?? DEFAULT_CONTENT_TYPE,
    'content-length',
    Buffer.byteLength(reply.body),
  )
  res.writeHead(reply.status, headers)
  if (reply.body.length <= SLICE_BYTES) res.end(reply.body)
  else endInSlices(res, Buffer.from(reply.body))
}

/** The most of a body handed to the socket at once. */
const SLICE_BYTES = 64 * 1024

/**
 * A large body (a page of large users can pass 9 MB) handed to the socket a slice at a time, the
 * next once the socket took the last. Node counts a write as done only once the kernel took all
 * of it: written whole, a client reading it slowly would show no progress for minutes, and be
 * taken for one that reads nothing (bulk/slow-client.ts). A response destroyed meanwhile never
 * drains again: the rest is left with it.
 */
function endInSlices(res: ServerResponse, body: Buffer): void {
  let offset = 0
  const next = (): void => {
    while (body.length - offset > SLICE_BYTES) {
      const slice = body.subarray(offset, offset + SLICE_BYTES)
      offset += SLICE_BYTES
      if (!res.write(slice)) {
        res.once('drain', next)
        return
      }
    }
    res.end(body.subarray(offset))
  }
  next()
}

/** The one place an error becomes an answer: application/problem+json (RFC 9457). */
export function toProblemReply(error: HttpError, requestId: string): Reply {
  const problem = {
    type: `${PROBLEM_TYPE_PREFIX}${error.code}`,
    title: error.title,
    status: error.status,
    detail: error.detail,
    code: error.code,
    requestId,
    ...problemExtras(error),
  }
  return {
    status: error.status,
    body: JSON.stringify(problem),
    contentType: 'application/problem+json',
    headers: error.headers,
  }
}
