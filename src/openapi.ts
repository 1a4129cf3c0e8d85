import { ERROR_CODES } from './errors.js'
import { MAX_BODY_BYTES } from './http/body.js'
import { ROUTES, type RouteSpec } from './http/route-table.js'
import { DEFAULT_LIMIT, MAX_LIMIT } from './users/list-query.js'
import { SORTS } from './users/cursor.js'
import { USER_STATUSES } from './users/user.js'
import { FIELD_NAMES, USER_FIELDS, WRITABLE_FIELDS, type FieldSpec } from './users/user-fields.js'

type Json = Readonly<Record<string, unknown>>

export interface OpenApiOptions {
  basePath: string
  version: string
}

const REQUEST_SCHEMAS: Readonly<Record<string, string>> = {
  createUser: 'UserCreate',
  replaceUser: 'UserReplace',
  updateUser: 'UserPatch',
  activateUser: 'EmptyBody',
  suspendUser: 'EmptyBody',
}

/**
 * The OpenAPI 3.1 document, built from the route table and the user field rules that routing and
 * validation run on, so that it describes what the service does.
 */
export function createOpenApiDocument(options: OpenApiOptions): Json {
  const paths: Record<string, Record<string, Json>> = {}
  for (const route of ROUTES) {
    const path = route.root ? route.path : `${options.basePath}${route.path}`
    paths[path] ??= {}
    paths[path][route.method.toLowerCase()] = toOperation(route)
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'User service',
      version: options.version,
      description: 'Users over REST with HMAC-signed bearer tokens, kept as one JSON file each. '
        + `Request bodies are at most ${MAX_BODY_BYTES} bytes. Every error is application/problem+json `
        + 'with a stable `code`; x-error-codes lists them all. Choices where the contract is silent: '
        + 'every 400 has code bad_request and a detail naming what was wrong; 503s say maintenance, '
        + 'overloaded, starting, shutting_down or storage_unavailable, with Retry-After; an empty or '
        + 'repeated query parameter is a 400; the ETag is "v<version>"; an answer sent before the whole '
        + 'body arrived (a 413, say) closes the connection in stages; bodies of GET and DELETE are '
        + 'ignored; list cursors are signed with a key derived from the first JWT key; a q page '
        + 'examines at most LIST_SCAN_BUDGET users and may come back short, even empty, with a '
        + 'nextCursor: follow nextCursor until it is null.',
    },
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT (HS256, HS384 or HS512)' } },
      schemas: schemas(),
      headers: {
        ETag: { description: 'Strong entity tag of the user version.', schema: { type: 'string' } },
      },
    },
    'x-error-codes': ERROR_CODES,
  }
}

function toOperation(route: RouteSpec): Json {
  const parameters: Json[] = [...pathParameters(route.path)]
  if (route.operationId === 'listUsers') parameters.push(...listParameters())
  if (route.conditional) parameters.push(conditionalHeader(route.method === 'GET' ? 'If-None-Match' : 'If-Match'))
  const schemaName = REQUEST_SCHEMAS[route.operationId]
  return {
    operationId: route.operationId,
    summary: route.summary,
    security: route.scope === undefined ? [] : [{ bearer: [route.scope] }],
    ...(parameters.length === 0 ? {} : { parameters }),
    ...(route.body === 'none' || schemaName === undefined ? {} : {
      requestBody: {
        required: route.body === 'required',
        content: Object.fromEntries(route.mediaTypes.map((type) => [type, { schema: ref(schemaName) }])),
      },
    }),
    responses: { ...successResponse(route), ...errorResponses(route) },
  }
}

function pathParameters(template: string): Json[] {
  return [...template.matchAll(/\{([A-Za-z0-9]+)\}/g)].map((match) => ({
    name: match[1], in: 'path', required: true, schema: { type: 'string', format: 'uuid' },
  }))
}

function listParameters(): Json[] {
  const query = (name: string, schema: Json, description: string): Json => ({ name, in: 'query', required: false, schema, description })
  return [
    query('limit', { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT }, 'Users per page.'),
    query('cursor', { type: 'string' }, 'The nextCursor of the previous page; it carries its filters and sort.'),
    query('status', { type: 'string', pattern: `^(${USER_STATUSES.join('|')})(,(${USER_STATUSES.join('|')}))*$` }, 'One status or a comma list.'),
    query('email', { type: 'string' }, 'Exact match, case-insensitive.'),
    query('q', { type: 'string', maxLength: 200 }, 'Case-insensitive substring of name or email.'),
    query('sort', { type: 'string', enum: SORTS, default: 'createdAt' }, 'Creation order, oldest or newest first.'),
  ]
}

function conditionalHeader(name: string): Json {
  return { name, in: 'header', required: false, schema: { type: 'string' } }
}

function successResponse(route: RouteSpec): Record<string, Json> {
  const json = (schema: Json): Json => ({ 'application/json': { schema } })
  switch (route.operationId) {
    case 'listUsers':
      return { 200: { description: 'A page of users; a page with more after it carries Link rel="next".', content: json(ref('UserPage')) } }
    case 'deleteUser':
      return { 204: { description: 'Deleted.' } }
    case 'getHealth':
    case 'getReadiness':
      return { 200: { description: route.summary, content: json({ type: 'object', properties: { status: { type: 'string' } } }) } }
    case 'getOpenApi':
      return { 200: { description: 'This document.', content: json({ type: 'object' }) } }
    default:
      return {
        [route.status]: { description: 'The user.', headers: { ETag: { $ref: '#/components/headers/ETag' } }, content: json(ref('User')) },
        ...(route.method === 'GET' ? { 304: { description: 'Not modified (If-None-Match).' } } : {}),
      }
  }
}

function errorResponses(route: RouteSpec): Record<string, Json> {
  const statuses = new Set<number>([500])
  if (!route.root) statuses.add(503)
  if (route.operationId === 'getReadiness') statuses.add(503)
  if (route.scope !== undefined) [401, 403].forEach((status) => statuses.add(status))
  if (route.path.includes('{')) [400, 404].forEach((status) => statuses.add(status))
  if (route.operationId === 'listUsers') statuses.add(400)
  if (route.body !== 'none') [400, 413, 415, 422].forEach((status) => statuses.add(status))
  // RFC 9110 §13.1.1: a failed If-Match is a 412 on GET and HEAD too.
  if (route.conditional) statuses.add(412)
  if (['createUser', 'replaceUser', 'updateUser', 'suspendUser'].includes(route.operationId)) statuses.add(409)
  const codes = Object.entries(ERROR_CODES)
  return Object.fromEntries([...statuses].sort().map((status) => [status, {
    description: codes.filter(([, entry]) => entry.status === status).map(([code]) => code).join(', '),
    content: { 'application/problem+json': { schema: ref('Problem') } },
  }]))
}

function ref(name: string): Json {
  return { $ref: `#/components/schemas/${name}` }
}

function schemas(): Record<string, Json> {
  const properties = Object.fromEntries(FIELD_NAMES.map((name) => [name, toSchema(USER_FIELDS[name])]))
  const writable = Object.fromEntries(WRITABLE_FIELDS.map((name) => [name, toSchema(USER_FIELDS[name])]))
  const required = WRITABLE_FIELDS.filter((name) => USER_FIELDS[name].required)
  const echo = 'Output-only fields may be sent only with their stored values.'
  return {
    User: { type: 'object', required: FIELD_NAMES, additionalProperties: false, properties },
    UserCreate: { type: 'object', required, additionalProperties: false, properties: writable, description: 'Output-only fields are refused (read_only).' },
    UserReplace: { type: 'object', required, additionalProperties: false, properties, description: `Replaces every writable field; a missing metadata becomes {}. ${echo}` },
    UserPatch: {
      type: 'object', additionalProperties: false,
      properties: { ...properties, metadata: { ...toSchema(USER_FIELDS.metadata), type: ['object', 'null'] } },
      description: `JSON Merge Patch (RFC 7396): null removes a metadata key, or all of metadata. ${echo}`,
    },
    EmptyBody: { type: 'object', maxProperties: 0, description: 'Send no body or {}.' },
    UserPage: {
      type: 'object', required: ['items', 'nextCursor'],
      properties: { items: { type: 'array', items: ref('User') }, nextCursor: { type: ['string', 'null'] } },
    },
    FieldError: {
      type: 'object', required: ['pointer', 'code', 'message'],
      properties: { pointer: { type: 'string' }, code: { type: 'string' }, message: { type: 'string' } },
    },
    Problem: {
      type: 'object', required: ['type', 'title', 'status', 'detail', 'code', 'requestId'],
      properties: {
        type: { type: 'string' }, title: { type: 'string' }, status: { type: 'integer' },
        detail: { type: 'string' }, code: { type: 'string', enum: Object.keys(ERROR_CODES) },
        requestId: { type: 'string' }, errors: { type: 'array', items: ref('FieldError') },
      },
    },
  }
}

function toSchema(spec: FieldSpec): Json {
  const common = { description: spec.description, examples: [spec.example], ...(spec.access === 'output' ? { readOnly: true } : {}) }
  if (spec.type === 'integer') return { type: 'integer', minimum: 1, ...common }
  if (spec.type === 'metadata') {
    return {
      type: 'object', maxProperties: spec.maxKeys, propertyNames: { pattern: spec.keyPattern },
      additionalProperties: { type: 'string', maxLength: spec.maxValueLength }, ...common,
    }
  }
  return {
    type: 'string',
    ...(spec.format === undefined ? {} : { format: spec.format }),
    ...(spec.minLength === undefined ? {} : { minLength: spec.minLength }),
    ...(spec.maxLength === undefined ? {} : { maxLength: spec.maxLength }),
    ...(spec.pattern === undefined ? {} : { pattern: spec.pattern }),
    ...(spec.enum === undefined ? {} : { enum: spec.enum }),
    ...common,
  }
}
