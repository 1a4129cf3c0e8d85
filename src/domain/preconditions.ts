import { ServiceError } from './errors.js'

/** The validators a request carries (RFC 9110 §13.1), as sent. */
export interface Preconditions {
  readonly ifMatch: string | undefined
  readonly ifNoneMatch: string | undefined
}

// Stryker disable next-line ObjectLiteral: reading a missing property gives the same undefined
export const NO_PRECONDITIONS: Preconditions = Object.freeze({
  ifMatch: undefined,
  ifNoneMatch: undefined,
})

/**
 * RFC 9110 §13.2.2 for a resource that exists, with the strong tag `etag` or with none (a list, a
 * feed, a collection one creates in): If-Match first (false → 412 whatever the method), then
 * If-None-Match (true → 304 for GET and HEAD, 412 for the rest). Without a tag only `*` matches.
 */
export function evaluatePreconditions(
  conditions: Preconditions,
  etag: string | undefined,
  safe: boolean,
): 'pass' | 'not_modified' | 'failed' {
  if (conditions.ifMatch !== undefined && !matchesIfMatch(conditions.ifMatch, etag)) return 'failed'
  if (conditions.ifNoneMatch !== undefined && matchesIfNoneMatch(conditions.ifNoneMatch, etag)) {
    return safe ? 'not_modified' : 'failed'
  }
  return 'pass'
}

/**
 * evaluatePreconditions for a request about to be answered: a false condition is thrown as
 * precondition_failed; a read (`safe`) learns whether to answer 304 instead.
 */
export function requirePreconditions(
  conditions: Preconditions,
  etag: string | undefined,
  safe: boolean,
): 'pass' | 'not_modified' {
  const outcome = evaluatePreconditions(conditions, etag, safe)
  if (outcome === 'failed') throw preconditionFailed(etag)
  return outcome
}

/**
 * The preconditions of a request on a resource that exists and has no ETag (a collection one
 * creates in, an import, a cursor, a stream), checked once the request's own checks passed and
 * before its content is read or anything is done (RFC 9110 §13.2.1).
 */
export function checkUntagged(conditions: Preconditions, safe: boolean): 'pass' | 'not_modified' {
  return requirePreconditions(conditions, undefined, safe)
}

/** The error of a request whose preconditions do not hold for the current tag `etag`, or for none. */
export function preconditionFailed(etag: string | undefined): ServiceError {
  return new ServiceError(
    'precondition_failed',
    etag === undefined
      ? 'A precondition does not hold: this resource exists and has no ETag, so only If-Match: * holds and If-None-Match: * never does.'
      : `A precondition does not hold for the current ETag ${etag}.`,
  )
}

/** If-Match compares strongly; `*` matches any current representation, tagged or not. */
export function matchesIfMatch(header: string, etag: string | undefined): boolean {
  if (header.trim() === '*') return true
  return splitTags(header).some((tag) => tag === etag)
}

/** If-None-Match compares weakly; `*` matches any current representation, tagged or not. */
export function matchesIfNoneMatch(header: string, etag: string | undefined): boolean {
  if (header.trim() === '*') return true
  return splitTags(header).some((tag) => stripWeak(tag) === etag)
}

function splitTags(header: string): string[] {
  const tags = header.split(',').map((tag) => tag.trim())
  // An empty element never equals a tag (tags are quoted), so this filter changes no outcome.
  // Stryker disable next-line MethodExpression,ConditionalExpression,StringLiteral: empty list elements never match a quoted tag
  return tags.filter((tag) => tag !== '')
}

function stripWeak(tag: string): string {
  return tag.startsWith('W/') ? tag.slice(2) : tag
}
