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
 * The validators of a request as its route declares them: a route that declares `conditional`
 * gets If-Match and If-None-Match as sent, any other gets none, whatever was sent. An empty one
 * (Node strips the white space around a value) names no tag and no `*`: a 400 naming the header.
 * The only reader of these two headers.
 */
export function readPreconditions(route: RouteSpec, headers: IncomingHttpHeaders): Preconditions {
  if (!route.conditional) return NO_PRECONDITIONS
  const ifMatch = readHeader(headers['if-match'], 'If-Match')
  const ifNoneMatch = readHeader(headers['if-none-match'], 'If-None-Match')
  if (ifMatch === undefined && ifNoneMatch === undefined) return NO_PRECONDITIONS
  return { ifMatch, ifNoneMatch }
}

/**
 * The answer of a conditional read (GET, and HEAD through it) once its handler found the
 * representation (RFC 9110 §13.2.2): If-Match that does not hold is 412, then If-None-Match that
 * does is 304 with the ETag and no body. A write's preconditions are checked by its operation,
 * against the user it is about to change, under the store's lock.
 */
export function answerConditionalRead(
  route: RouteSpec,
  conditions: Preconditions,
  reply: Reply,
): Reply {
  if (route.method !== 'GET' || conditions === NO_PRECONDITIONS) return reply
  const etag = reply.etag
  // Only a found representation has validators to compare: an error keeps its status.
  if (etag === undefined || reply.status !== 200) return reply
  const outcome = evaluatePreconditions(conditions, etag, true)
  if (outcome === 'failed') throw preconditionFailed(etag)
  return outcome === 'not_modified' ? { status: 304, etag } : reply
}

function readHeader(value: string | undefined, name: string): string | undefined {
  if (value === undefined) return undefined
  if (value.trim() === '') throw new HttpError('bad_request', `The header ${name} is empty.`)
  return value
}
