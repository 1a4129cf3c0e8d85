import { ERROR_CODES } from '../http/problem.js'
import { type Json, ref } from '../routes/route.js'

export function headerRef(name: string): Json {
  return { $ref: `#/components/headers/${name}` }
}

/** components.headers: every header an answer of the service declares. */
export function createHeaders(): Record<string, Json> {
  const string = { type: 'string' }
  return {
    'X-Request-Id': {
      required: true,
      schema: string,
      description: 'The request id, also in the log line and in errors.',
    },
    'Cache-Control-Private': {
      required: true,
      schema: { const: 'private, no-cache' },
      description: 'Cache-Control of a successful read.',
    },
    'Cache-Control-No-Store': {
      required: true,
      schema: { const: 'no-store' },
      description: 'Cache-Control of every other answer.',
    },
    Vary: {
      required: true,
      // Two field lines with CORS on (Vary: Authorization, then Vary: Origin), read as one list.
      schema: { type: 'string', enum: ['Authorization', 'Authorization, Origin'] },
      description:
        'Reads depend on the token; with CORS on (CORS_ORIGINS), on the Origin too: Authorization, Origin.',
    },
    ETag: {
      required: true,
      schema: { type: 'string', pattern: '^"v[0-9]+"$' },
      description: 'Strong entity tag of the version of the user or webhook endpoint.',
    },
    Location: {
      required: true,
      schema: string,
      description:
        'The path of what was made: <base path>/users/<id> or <base path>/webhooks/<id>.',
    },
    Link: {
      required: false,
      schema: string,
      description:
        'On a page with more after it, the next page: <<path>?limit=<limit>&cursor=<next>>; rel="next" (RFC 8288).',
    },
    'Retry-After': {
      required: true,
      schema: { type: 'string', pattern: '^[0-9]+$' },
      description: 'Seconds to wait before trying again.',
    },
    'WWW-Authenticate': {
      required: true,
      schema: string,
      description: 'Bearer realm="users", with error="invalid_token" when a token was sent.',
    },
    'WWW-Authenticate-Scope': {
      required: false,
      schema: string,
      description:
        'For insufficient_scope: Bearer realm="users", error="insufficient_scope", scope="<the scope>".',
    },
    'Accept-Patch': { required: true, schema: string, description: 'The media types PATCH takes.' },
    'Accept-Encoding': {
      required: false,
      schema: { type: 'string', enum: ['identity'] },
      description:
        'On a body sent with a Content-Encoding: identity, the one content coding request bodies are taken in.',
    },
    'Idempotent-Replayed': {
      required: false,
      schema: { type: 'string', enum: ['true'] },
      description:
        'true on the replay of a kept answer to a request sent again with its Idempotency-Key; absent on an answer to a request that ran.',
    },
    'Retry-After-In-Use': {
      required: false,
      schema: { type: 'string', pattern: '^[0-9]+$' },
      description: 'On idempotency_key_in_use: 1, the seconds to wait before trying again.',
    },
    ...RATE_LIMIT_HEADERS,
  }
}

const COUNTED = 'Sent on every answer to a request the rate limits count (none when they are off).'
const seconds = { type: 'string', pattern: '^[0-9]+$' }

/** The rate-limit fields of a counted answer (docs/api.md, rate limits). */
const RATE_LIMIT_HEADERS: Record<string, Json> = {
  'RateLimit-Policy': {
    required: false,
    schema: { type: 'string', pattern: '^"(subject|address)";q=[0-9]+;w=[0-9]+$' },
    description: `The quota policy, such as "subject";q=600;w=60 (q requests per w seconds). ${COUNTED}`,
  },
  RateLimit: {
    required: false,
    schema: { type: 'string', pattern: '^"(subject|address)";r=[0-9]+;t=[0-9]+$' },
    description: `Requests left in the window (r) and seconds until it ends (t). ${COUNTED}`,
  },
  'X-RateLimit-Limit': { required: false, schema: seconds, description: `The quota. ${COUNTED}` },
  'X-RateLimit-Remaining': {
    required: false,
    schema: seconds,
    description: `Requests left in the window. ${COUNTED}`,
  },
  'X-RateLimit-Used': {
    required: false,
    schema: seconds,
    description: `Requests taken in the window. ${COUNTED}`,
  },
  'X-RateLimit-Reset': {
    required: false,
    schema: seconds,
    description: `When the window ends, in Unix seconds. ${COUNTED}`,
  },
}

/** References to the rate-limit fields, for the answers of counted routes. */
export function rateLimitHeaderRefs(): Record<string, Json> {
  return Object.fromEntries(Object.keys(RATE_LIMIT_HEADERS).map((name) => [name, headerRef(name)]))
}

/** One shared response per error status; the statuses each route can answer pick from these. */
const ERROR_RESPONSES = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  408: 'RequestTimeout',
  409: 'Conflict',
  410: 'Gone',
  412: 'PreconditionFailed',
  413: 'PayloadTooLarge',
  415: 'UnsupportedMediaType',
  417: 'ExpectationFailed',
  422: 'UnprocessableContent',
  429: 'TooManyRequests',
  431: 'HeadersTooLarge',
  500: 'InternalError',
  503: 'Unavailable',
} as const

/**
 * components.responses: one problem+json answer per error status, and PATCH's own 415; and, for
 * each of `uncounted` (the statuses of routes the rate limits never count), one without the
 * rate-limit fields.
 */
export function createErrorResponses(uncounted: ReadonlySet<number>): Record<string, Json> {
  const extra: Partial<Record<number, Record<string, Json>>> = {
    401: { 'WWW-Authenticate': headerRef('WWW-Authenticate') },
    403: { 'WWW-Authenticate': headerRef('WWW-Authenticate-Scope') },
    409: { 'Retry-After': headerRef('Retry-After-In-Use') },
    415: { 'Accept-Encoding': headerRef('Accept-Encoding') },
    429: { 'Retry-After': headerRef('Retry-After') },
    503: { 'Retry-After': headerRef('Retry-After') },
  }
  const responses: Record<string, Json> = {}
  for (const [status, name] of Object.entries(ERROR_RESPONSES)) {
    const own = extra[Number(status)] ?? {}
    responses[name] = problemResponse(Number(status), { ...own, ...rateLimitHeaderRefs() })
    if (uncounted.has(Number(status))) {
      responses[errorResponseName(Number(status), false)] = problemResponse(Number(status), own)
    }
  }
  responses['UnsupportedPatchMediaType'] = problemResponse(415, {
    'Accept-Patch': headerRef('Accept-Patch'),
    'Accept-Encoding': headerRef('Accept-Encoding'),
    ...rateLimitHeaderRefs(),
  })
  return responses
}

/** The name in components.responses of an error status, of a counted route or of another. */
export function errorResponseName(status: number, counted: boolean): string {
  const name = Object.entries(ERROR_RESPONSES).find(([code]) => Number(code) === status)?.[1]
  if (name === undefined) throw new Error(`createOpenApiDocument: no error response for ${status}`)
  return counted ? name : `${name}Uncounted`
}

function problemResponse(status: number, extra: Record<string, Json>): Json {
  const codes = Object.entries(ERROR_CODES)
    .filter(([, entry]) => entry.status === status)
    .map(([code]) => code)
  return {
    description: codes.join(', '),
    headers: {
      'X-Request-Id': headerRef('X-Request-Id'),
      'Cache-Control': headerRef('Cache-Control-No-Store'),
      ...extra,
    },
    content: { 'application/problem+json': { schema: ref('Problem') } },
  }
}
