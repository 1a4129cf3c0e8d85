import { NOT_BLANK, USER_ID } from '../routes/parameter-schemas.js'
import type { Json, ResponseDoc, Route } from '../routes/route.js'
import { errorResponseName, headerRef, rateLimitHeaderRefs } from './components.js'

/** The Operation Object of one route: everything read from the route itself. */
export function toOperation(route: Route): Json {
  const parameters: Json[] = [...pathParameters(route), ...(route.parameters ?? [])]
  parameters.push(...conditionalHeaders(route))
  if (route.idempotencyKey === true) {
    parameters.push({ $ref: '#/components/parameters/IdempotencyKey' })
  }
  parameters.push({ $ref: '#/components/parameters/RequestId' })
  return {
    operationId: route.operationId,
    summary: route.summary,
    description: describeOperation(route),
    tags: [route.tag],
    security: route.scope === undefined ? [] : [{ bearer: [route.scope] }],
    parameters,
    ...(route.body === 'none' || route.request === undefined
      ? {}
      : { requestBody: requestBody(route, route.request) }),
    responses: { ...successResponses(route), ...errorResponses(route) },
  }
}

function requestBody(route: Route, request: NonNullable<Route['request']>): Json {
  return {
    // A streamed body is the whole point of its route; a JSON body may be optional.
    required: route.body === 'required' || route.body === 'stream',
    ...(request.description === undefined ? {} : { description: request.description }),
    content: Object.fromEntries(route.mediaTypes.map((type) => [type, { schema: request.schema }])),
  }
}

function describeOperation(route: Route): string {
  const scope =
    route.scope === undefined
      ? 'No token needed.'
      : `Needs a bearer token with the scope ${route.scope}.`
  const cache = route.cacheable
    ? 'A success may be kept privately and must be revalidated (Cache-Control: private, no-cache; Vary: Authorization, plus Origin with CORS on).'
    : 'Answers are never stored (Cache-Control: no-store).'
  return `${route.summary}. ${scope} ${cache}`
}

function pathParameters(route: Route): Json[] {
  const what = route.tag === 'webhooks' ? 'The webhook endpoint id' : 'The user id'
  return [...route.path.matchAll(/\{([A-Za-z0-9]+)\}/g)].map((match) => ({
    name: match[1],
    in: 'path',
    required: true,
    schema: USER_ID,
    description: `${what} (a lower-case UUIDv7); any other text is 404 not_found.`,
  }))
}

/** Every route evaluates both (RFC 9110 §13.2.1); a resource without an ETag matches only `*`. */
function conditionalHeaders(route: Route): Json[] {
  const otherwise = route.method === 'GET' ? '304 without a body' : '412 precondition_failed'
  const header = (name: string, description: string): Json => ({
    name,
    in: 'header',
    required: false,
    schema: { type: 'string', ...NOT_BLANK },
    description,
  })
  if (!route.tagged) {
    return [
      header(
        'If-Match',
        'This resource has no ETag: * holds, and any list of tags is 412 precondition_failed.',
      ),
      header(
        'If-None-Match',
        `A list of tags never matches; * does (the resource exists): ${otherwise}.`,
      ),
    ]
  }
  return [
    header(
      'If-Match',
      'The ETag you last saw, a comma list of them, or *; when none matches: 412 precondition_failed.',
    ),
    header(
      'If-None-Match',
      route.method === 'GET'
        ? `When it matches (weakly) the current ETag, or is *: ${otherwise}.`
        : `When it matches the current ETag, or is *: ${otherwise}.`,
    ),
  ]
}

/** A read of a resource without an ETag answers `If-None-Match: *` 304 too. */
const UNTAGGED_NOT_MODIFIED: ResponseDoc = {
  description: 'Not modified (If-None-Match is *); no body.',
}

function documentedAnswers(route: Route): Readonly<Record<number, ResponseDoc>> {
  if (route.method !== 'GET' || 304 in route.responses) return route.responses
  return { ...route.responses, 304: UNTAGGED_NOT_MODIFIED }
}

function successResponses(route: Route): Record<string, Json> {
  const cache = route.cacheable
    ? { 'Cache-Control': headerRef('Cache-Control-Private'), Vary: headerRef('Vary') }
    : { 'Cache-Control': headerRef('Cache-Control-No-Store') }
  const responses: Record<string, Json> = {}
  for (const [status, answer] of Object.entries(documentedAnswers(route))) {
    const extra = Object.fromEntries((answer.headers ?? []).map((name) => [name, headerRef(name)]))
    const content =
      answer.content === undefined
        ? undefined
        : Object.fromEntries(
            Object.entries(answer.content).map(([type, schema]) => [type, { schema }]),
          )
    responses[status] = {
      description: answer.description,
      headers: {
        'X-Request-Id': headerRef('X-Request-Id'),
        ...cache,
        ...extra,
        ...(route.root ? {} : rateLimitHeaderRefs()),
        ...(route.idempotencyKey === true
          ? { 'Idempotent-Replayed': headerRef('Idempotent-Replayed') }
          : {}),
      },
      ...(content === undefined ? {} : { content }),
    }
  }
  return responses
}

/** The error statuses a route can answer, in the order faults are checked (docs/api.md). */
export function errorStatuses(route: Route): number[] {
  // Node's parser refuses a malformed request, slow headers or huge headers on any route, and any
  // request may carry an expectation the service cannot meet.
  const statuses = new Set<number>([400, 408, 417, 431, 500])
  if (!route.root) for (const status of [429, 503]) statuses.add(status)
  if (route.scope !== undefined) for (const status of [401, 403]) statuses.add(status)
  if (route.path.includes('{')) statuses.add(404)
  if (route.body !== 'none') for (const status of [413, 415]) statuses.add(status)
  // A streamed body is its handler's to read: a bad line is a result line of the 200, never a 422.
  if (route.body === 'optional' || route.body === 'required') statuses.add(422)
  // RFC 9110 §13.1.1: a failed If-Match is a 412 on every route, GET and HEAD included.
  statuses.add(412)
  for (const status of route.errors ?? []) statuses.add(status)
  // A key in flight (409), a body over its limit (413: with a key even a DELETE's bytes are read,
  // for the request's fingerprint) or a key sent with another request (422).
  if (route.idempotencyKey === true) for (const status of [409, 413, 422]) statuses.add(status)
  return [...statuses].sort((a, b) => a - b)
}

function errorResponses(route: Route): Record<string, Json> {
  return Object.fromEntries(
    errorStatuses(route).map((status) => {
      const name =
        status === 415 && route.method === 'PATCH'
          ? 'UnsupportedPatchMediaType'
          : errorResponseName(status, !route.root)
      return [status, { $ref: `#/components/responses/${name}` }]
    }),
  )
}
