import type { IncomingHttpHeaders } from 'node:http'

import {
  NO_PRECONDITIONS,
  type Preconditions,
  requirePreconditions,
} from '../domain/preconditions.js'
import { HttpError } from './problem.js'
import type { Reply } from './respond.js'
import type { RouteSpec } from './route-spec.js'

/**
 * If-Match and If-None-Match as sent, on every route (RFC 9110 §13.2.1: an origin server evaluates
 * them). An empty one (Node strips the white space around a value) names no tag and no `*`: a 400
 * naming the header. The only reader of these two headers.
 */
export function readPreconditions(headers: IncomingHttpHeaders): Preconditions {
  const ifMatch = readHeader(headers['if-match'], 'If-Match')
  const ifNoneMatch = readHeader(headers['if-none-match'], 'If-None-Match')
  if (ifMatch === undefined && ifNoneMatch === undefined) return NO_PRECONDITIONS
  return { ifMatch, ifNoneMatch }
}

/**
 * The answer of a read (GET, and HEAD through it) once its handler found the representation
 * (RFC 9110 §13.2.2): If-Match that does not hold is 412, then If-None-Match that does is 304 with
 * the ETag, if any, and no body. A representation without an ETag (a list, a page of the feed)
 * holds only `*`. An error keeps its status: preconditions only ever turn a success around.
 */
export function answerConditionalRead(
  route: RouteSpec,
  conditions: Preconditions,
  reply: Reply,
): Reply {
  if (route.method !== 'GET' || conditions === NO_PRECONDITIONS || reply.status !== 200) {
    return reply
  }
  if (requirePreconditions(conditions, reply.etag, true) === 'pass') return reply
  return reply.etag === undefined ? { status: 304 } : { status: 304, etag: reply.etag }
}

function readHeader(value: string | undefined, name: string): string | undefined {
  if (value === undefined) return undefined
  if (value.trim() === '') throw new HttpError('bad_request', `The header ${name} is empty.`)
  return value
}
