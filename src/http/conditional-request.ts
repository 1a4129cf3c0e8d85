import type { IncomingHttpHeaders } from 'node:http'

import {
  evaluatePreconditions,
  NO_PRECONDITIONS,
  type Preconditions,
  preconditionFailed,
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
  const outcome = evaluatePreconditions(conditions, reply.etag, true)
  if (outcome === 'failed') throw preconditionFailed(reply.etag)
  if (outcome === 'pass') return reply
  return reply.etag === undefined ? { status: 304 } : { status: 304, etag: reply.etag }
}

/**
 * The preconditions of a request on a resource that exists and has no ETag, checked by its handler
 * once its own checks passed and before it reads the content or acts (RFC 9110 §13.2.1): a create
 * in a collection, an import, a cursor, the start of a stream. `not_modified` is for a read to
 * answer 304 instead of streaming; a write's false condition is a 412 thrown here.
 */
export function checkUntagged(conditions: Preconditions, safe: boolean): 'pass' | 'not_modified' {
  if (conditions === NO_PRECONDITIONS) return 'pass'
  const outcome = evaluatePreconditions(conditions, undefined, safe)
  if (outcome === 'failed') throw preconditionFailed(undefined)
  return outcome
}

function readHeader(value: string | undefined, name: string): string | undefined {
  if (value === undefined) return undefined
  if (value.trim() === '') throw new HttpError('bad_request', `The header ${name} is empty.`)
  return value
}
