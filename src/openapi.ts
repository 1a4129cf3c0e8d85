import { ERROR_CODES } from './errors.js'
import { createEventSchemas, eventParameters, eventSuccess } from './events/openapi.js'
import { MAX_BODY_BYTES } from './http/body.js'
import { ROUTES, type RouteSpec } from './http/route-table.js'
import { createSchemas, ref } from './openapi-schemas.js'
import { DEFAULT_LIMIT, MAX_IDS, MAX_LIMIT } from './users/list-query.js'
import { SORTS } from './users/cursor.js'
import { USER_STATUSES } from './domain/user.js'

type Json = Readonly<Record<string, unknown>>

export interface OpenApiOptions {
  basePath: string
  version: string
  /** The routes served (default all of them): /metrics is left out when it is off. */
  routes?: readonly RouteSpec[]
}

const REQUEST_SCHEMAS: Readonly<Record<string, string>> = {
  createUser: 'UserCreate',
  replaceUser: 'UserReplace',
  updateUser: 'UserPatch',
  activateUser: 'EmptyBody',
  suspendUser: 'EmptyBody',
}

const SCOPES = {
  'users:read': 'List and read users.',
  'users:write': 'Create, replace, change and delete users.',
  'users:admin': 'Activate and suspend users.',
  'events:read': 'Read the change feed (§10); it stands alone: no users scope implies it.',
} as const

/**
 * The OpenAPI 3.1 document, built from the route table and the user field rules that routing and
 * validation run on, so that it describes what the service does. Paths are relative to the one
 * server, the base path; root routes (probes) name the server root as their own server.
 */
export function createOpenApiDocument(options: OpenApiOptions): Json {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const route of options.routes ?? ROUTES) {
    const item = paths[route.path] ?? pathItem(route)
    item[route.method.toLowerCase()] = toOperation(route)
    paths[route.path] = item
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'User service',
      version: options.version,
      description: describeService(),
      license: { name: 'MIT', identifier: 'MIT' },
      contact: { name: 'User service maintainers' },
    },
    servers: [{ url: options.basePath === '' ? '/' : options.basePath, description: 'This service (its base path).' }],
    tags: [
      { name: 'users', description: 'The user resource and its lifecycle.' },
      { name: 'service', description: 'Probes and this document; no token needed.' },
      { name: 'events', description: 'The change feed and audit trail (§10), as pages or live.' },
    ],
    paths,
    components: {
      securitySchemes: {
        bearer: {
          type: 'http', scheme: 'bearer', bearerFormat: 'JWT (HS256, HS384 or HS512)',
          description: 'A JWT whose space-separated scope claim holds the scopes an operation needs '
            + '(none implies another). Security requirements name that scope, as OpenAPI 3.1 allows '
            + 'for http schemes; x-scopes lists them all.',
          'x-scopes': SCOPES,
        },
      },
      schemas: { ...createSchemas(), ...createEventSchemas() },
      parameters: {
        RequestId: {
          name: 'X-Request-Id', in: 'header', required: false, schema: { type: 'string' },
          description: 'Echoed when it is 1-128 characters of [A-Za-z0-9._-]; otherwise the service makes one.',
        },
      },
      headers: createHeaders(),
      responses: createErrorResponses(),
    },
    'x-error-codes': ERROR_CODES,
  }
}

function describeService(): string {
  return 'Users over REST with HMAC-signed bearer tokens. '
    + `Request bodies are at most ${MAX_BODY_BYTES} bytes. Every error is application/problem+json `
    + 'with a stable `code`; x-error-codes lists them all with their statuses. Any request may also '
    + 'be refused before routing (400 for a malformed request, 408, 431). A method not listed for a '
    + 'path is 405 method_not_allowed with an Allow header; HEAD is answered wherever GET is; an '
    + 'unknown path is 404. Choices where the contract is silent: every 400 has code bad_request and '
    + 'a detail naming what was wrong; 503s say maintenance, overloaded, starting, shutting_down or '
    + 'storage_unavailable, with Retry-After; an empty or repeated query parameter is a 400; the ETag '
    + 'is "v<version>"; an answer sent before the whole body arrived (a 413, say) closes the '
    + 'connection in stages; bodies of GET and DELETE are ignored; a lone surrogate in any string is '
    + '422 invalid_characters; list cursors are signed with a key derived from the first JWT key; '
    + 'a q page examines at most LIST_SCAN_BUDGET users and may come back short, even empty, with a '
    + 'nextCursor: follow nextCursor until it is null. Patterns are ECMAScript expressions with the '
    + 'u flag over the value as sent.'
}

function pathItem(route: RouteSpec): Record<string, unknown> {
  const methods = ROUTES.filter((other) => other.path === route.path).map((other) => other.method)
  return {
    description: `Allows ${[...methods, ...(methods.includes('GET') ? ['HEAD'] : [])].join(', ')}; `
      + 'any other method is 405 method_not_allowed with an Allow header.',
    ...(route.root ? { servers: [{ url: '/', description: 'The server root, outside the base path.' }] } : {}),
  }
}

function toOperation(route: RouteSpec): Json {
  const parameters: Json[] = [...pathParameters(route.path)]
  if (route.operationId === 'listUsers') parameters.push(...listParameters())
  if (route.operationId === 'listEvents') parameters.push(...eventParameters())
  if (route.conditional) parameters.push(...conditionalHeaders(route))
  parameters.push({ $ref: '#/components/parameters/RequestId' })
  const schemaName = REQUEST_SCHEMAS[route.operationId]
  return {
    operationId: route.operationId,
    summary: route.summary,
    description: describeOperation(route),
    tags: [route.path.startsWith('/users') ? 'users' : route.path === '/events' ? 'events' : 'service'],
    security: route.scope === undefined ? [] : [{ bearer: [route.scope] }],
    parameters,
    ...(route.body === 'stream' ? {
      requestBody: {
        required: true,
        description: 'NDJSON: one user per line, as exported (id, status, time stamps and version kept) or new (email, name and metadata only). At most IMPORT_MAX_BYTES, read as a stream; a line over 64 KiB gets a 413 result of its own.',
        content: Object.fromEntries(route.mediaTypes.map((type) => [type, { schema: { type: 'string' } }])),
      },
    } : {}),
    ...(route.body === 'none' || route.body === 'stream' || schemaName === undefined ? {} : {
      requestBody: {
        required: route.body === 'required',
        content: Object.fromEntries(route.mediaTypes.map((type) => [type, { schema: ref(schemaName) }])),
      },
    }),
    responses: { ...successResponses(route), ...errorResponses(route) },
  }
}

function describeOperation(route: RouteSpec): string {
  const scope = route.scope === undefined ? 'No token needed.' : `Needs a bearer token with the scope ${route.scope}.`
  const cache = route.cacheable
    ? 'A success may be kept privately and must be revalidated (Cache-Control: private, no-cache; Vary: Authorization).'
    : 'Answers are never stored (Cache-Control: no-store).'
  return `${route.summary}. ${scope} ${cache}`
}

function pathParameters(template: string): Json[] {
  return [...template.matchAll(/\{([A-Za-z0-9]+)\}/g)].map((match) => ({
    name: match[1], in: 'path', required: true, schema: { type: 'string', format: 'uuid' },
    description: 'The user id (a lower-case UUIDv7); any other text is 404 not_found.',
  }))
}

// The service trims each value and refuses one that is then empty (`?email=` or `?email=%20`).
const NOT_BLANK = { minLength: 1, pattern: '\\S' } as const

function listParameters(): Json[] {
  const query = (name: string, schema: Json, description: string): Json => ({ name, in: 'query', required: false, schema, description })
  const status = `(${USER_STATUSES.join('|')})`
  const repeated = 'Each parameter at most once; an unknown, empty or malformed one is 400 bad_request.'
  return [
    query('limit', { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT }, `Users per page. ${repeated}`),
    query('cursor', { type: 'string', ...NOT_BLANK }, 'The nextCursor of the previous page; it carries its filters and sort, so it may be sent alone. Filters or sort that differ from its own are 400.'),
    query('status', { type: 'string', pattern: `^\\s*${status}\\s*(,\\s*${status}\\s*)*$` }, 'One status or a comma list.'),
    query('email', { type: 'string', ...NOT_BLANK }, 'Exact match, case-insensitive.'),
    query('q', { type: 'string', maxLength: 200, ...NOT_BLANK }, 'Case-insensitive substring of name or email.'),
    query('sort', { type: 'string', enum: SORTS, default: 'createdAt' }, 'Creation order, oldest or newest first.'),
    query('ids', { type: 'string', ...NOT_BLANK }, `A batch get: a comma list of up to ${MAX_IDS} user ids; the users that exist, in the order asked, as one page (nextCursor null). Unknown ids are left out; a malformed id, or any other parameter beside it, is 400.`),
  ]
}

function conditionalHeaders(route: RouteSpec): Json[] {
  const read = route.method === 'GET'
  return [
    {
      name: 'If-Match', in: 'header', required: false, schema: { type: 'string', ...NOT_BLANK },
      description: 'The ETag you last saw, a comma list of them, or *; when none matches: 412 precondition_failed.',
    },
    {
      name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string', ...NOT_BLANK },
      description: read
        ? 'When it matches (weakly) the current ETag, or is *: 304 without a body.'
        : 'When it matches the current ETag, or is *: 412 precondition_failed.',
    },
  ]
}

function headerRef(name: string): Json {
  return { $ref: `#/components/headers/${name}` }
}

function createHeaders(): Record<string, Json> {
  const string = { type: 'string' }
  return {
    'X-Request-Id': { required: true, schema: string, description: 'The request id, also in the log line and in errors.' },
    'Cache-Control-Private': { required: true, schema: { const: 'private, no-cache' }, description: 'Cache-Control of a successful read.' },
    'Cache-Control-No-Store': { required: true, schema: { const: 'no-store' }, description: 'Cache-Control of every other answer.' },
    Vary: { required: true, schema: { const: 'Authorization' }, description: 'Reads depend on the token.' },
    ETag: { required: true, schema: { type: 'string', pattern: '^"v[0-9]+"$' }, description: 'Strong entity tag of the user version.' },
    Location: { required: true, schema: string, description: 'The path of the new user: <base path>/users/<id>.' },
    Link: {
      required: false, schema: string,
      description: 'On a page with more after it: <<base path>/users?limit=<limit>&cursor=<next>>; rel="next" (RFC 8288).',
    },
    'Retry-After': { required: true, schema: { type: 'string', pattern: '^[0-9]+$' }, description: 'Seconds to wait before trying again.' },
    'WWW-Authenticate': { required: true, schema: string, description: 'Bearer realm="users", with error="invalid_token" when a token was sent.' },
    'WWW-Authenticate-Scope': {
      required: false, schema: string,
      description: 'For insufficient_scope: Bearer realm="users", error="insufficient_scope", scope="<the scope>".',
    },
    'Accept-Patch': { required: true, schema: string, description: 'The media types PATCH takes.' },
  }
}

function successResponses(route: RouteSpec): Record<string, Json> {
  const cache = route.cacheable ? { 'Cache-Control': headerRef('Cache-Control-Private'), Vary: headerRef('Vary') } : { 'Cache-Control': headerRef('Cache-Control-No-Store') }
  const headers = (extra: Record<string, Json> = {}): Json => ({ 'X-Request-Id': headerRef('X-Request-Id'), ...cache, ...extra })
  const json = (schema: Json): Json => ({ 'application/json': { schema } })
  const etag = { ETag: headerRef('ETag') }
  switch (route.operationId) {
    case 'listUsers':
      return { 200: { description: 'A page of users; a page with more after it carries Link rel="next".', headers: headers({ Link: headerRef('Link') }), content: json(ref('UserPage')) } }
    case 'createUser':
      return { 201: { description: 'Created.', headers: headers({ ...etag, Location: headerRef('Location') }), content: json(ref('User')) } }
    case 'deleteUser':
      return { 204: { description: 'Deleted.', headers: headers() } }
    case 'getHealth':
    case 'getReadiness':
      return { 200: { description: route.summary, headers: headers(), content: json(ref('Status')) } }
    case 'getMetrics':
      return { 200: { description: route.summary, headers: headers(), content: { 'text/plain': { schema: { type: 'string' } } } } }
    case 'exportUsers':
      return { 200: { description: 'Every user that existed throughout the export, exactly once, one JSON user per line, in id order.', headers: headers(), content: { 'application/x-ndjson': { schema: { type: 'string' } } } } }
    case 'importUsers':
      return { 200: { description: 'One result per non-blank input line, in input order, each sent once its user is durable: {"line":1,"status":201,"id":"…"}; 200 when that id already holds exactly that user; 400 a malformed line, 409 (code duplicate_email or duplicate_id), 413 a line over 64 KiB, 422 with errors, 503 storage_unavailable or maintenance.', headers: headers(), content: { 'application/x-ndjson': { schema: { type: 'string' } } } } }
    case 'listEvents':
      return eventSuccess(headers())
    case 'getOpenApi':
      return { 200: { description: 'This document.', headers: headers(), content: json({ type: 'object' }) } }
    case 'getUser':
    case 'replaceUser':
    case 'updateUser':
    case 'activateUser':
    case 'suspendUser':
      return {
        [route.status]: { description: 'The user.', headers: headers(etag), content: json(ref('User')) },
        ...(route.method === 'GET' && route.conditional ? { 304: { description: 'Not modified (If-None-Match matched).', headers: headers(etag) } } : {}),
      }
    default:
      // A route this document has no schema for yet: its status and headers, no body promise.
      return { [route.status]: { description: route.summary, headers: headers() } }
  }
}

/** One shared response per error status; the statuses each route can answer pick from these. */
const ERROR_RESPONSES = {
  400: 'BadRequest', 401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound', 408: 'RequestTimeout',
  409: 'Conflict', 410: 'Gone', 412: 'PreconditionFailed', 413: 'PayloadTooLarge', 415: 'UnsupportedMediaType',
  422: 'UnprocessableContent', 431: 'HeadersTooLarge', 500: 'InternalError', 503: 'Unavailable',
} as const

function createErrorResponses(): Record<string, Json> {
  const extra: Partial<Record<number, Record<string, Json>>> = {
    401: { 'WWW-Authenticate': headerRef('WWW-Authenticate') },
    403: { 'WWW-Authenticate': headerRef('WWW-Authenticate-Scope') },
    503: { 'Retry-After': headerRef('Retry-After') },
  }
  const responses: Record<string, Json> = {}
  for (const [status, name] of Object.entries(ERROR_RESPONSES)) {
    responses[name] = problemResponse(Number(status), extra[Number(status)] ?? {})
  }
  responses['UnsupportedPatchMediaType'] = problemResponse(415, { 'Accept-Patch': headerRef('Accept-Patch') })
  return responses
}

function problemResponse(status: number, extra: Record<string, Json>): Json {
  const codes = Object.entries(ERROR_CODES).filter(([, entry]) => entry.status === status).map(([code]) => code)
  return {
    description: codes.join(', '),
    headers: { 'X-Request-Id': headerRef('X-Request-Id'), 'Cache-Control': headerRef('Cache-Control-No-Store'), ...extra },
    content: { 'application/problem+json': { schema: ref('Problem') } },
  }
}

/** The error statuses a route can answer, in the fault order of the contract (§3). */
export function errorStatuses(route: RouteSpec): number[] {
  // Node's parser refuses a malformed request, slow headers or huge headers on any route.
  const statuses = new Set<number>([400, 408, 431, 500])
  if (!route.root || route.operationId === 'getReadiness') statuses.add(503)
  if (route.scope !== undefined) [401, 403].forEach((status) => statuses.add(status))
  if (route.path.includes('{')) statuses.add(404)
  if (route.body !== 'none') [413, 415, 422].forEach((status) => statuses.add(status))
  // RFC 9110 §13.1.1: a failed If-Match is a 412 on GET and HEAD too.
  if (route.conditional) statuses.add(412)
  if (route.operationId === 'listEvents') statuses.add(410)
  // A change can meet another user's email, a wrong state, or a user at the highest version.
  if (['createUser', 'replaceUser', 'updateUser', 'activateUser', 'suspendUser', 'importUsers'].includes(route.operationId)) statuses.add(409)
  return [...statuses].sort((a, b) => a - b)
}

function errorResponses(route: RouteSpec): Record<string, Json> {
  return Object.fromEntries(errorStatuses(route).map((status) => {
    const name = status === 415 && route.method === 'PATCH' ? 'UnsupportedPatchMediaType' : errorResponseName(status)
    return [status, { $ref: `#/components/responses/${name}` }]
  }))
}

function errorResponseName(status: number): string {
  const name = Object.entries(ERROR_RESPONSES).find(([code]) => Number(code) === status)?.[1]
  if (name === undefined) throw new Error(`createOpenApiDocument: no error response for ${status}`)
  return name
}
