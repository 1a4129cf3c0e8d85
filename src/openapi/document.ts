import { MAX_BODY_BYTES } from '../http/body.js'
import { ERROR_CODES } from '../http/problem.js'
import type { Json, Route } from '../routes/route.js'
import { ROUTES } from '../routes/route-list.js'
import { createErrorResponses, createHeaders } from './components.js'
import { createEventSchemas } from './event-schemas.js'
import { IDEMPOTENCY_KEY_PATTERN } from './idempotency-key-pattern.js'
import { errorStatuses, toOperation } from './operation.js'
import { createSchemas } from './user-schemas.js'
import { createWebhookPayloads } from './webhook-payloads.js'
import { createWebhookSchemas } from './webhook-schemas.js'

export interface OpenApiOptions {
  basePath: string
  version: string
  /** The routes served (default all of them): /metrics is left out when it is off. */
  routes?: readonly Route[]
}

const SCOPES = {
  'users:read': 'List and read users.',
  'users:write': 'Create, replace, change and delete users.',
  'users:admin':
    'Activate and suspend users and revoke their tokens (:activate, :suspend, :revokeTokens); export and import them all (:export, :import).',
  'events:read': 'Read the change feed; it stands alone: no users scope implies it.',
  'webhooks:admin':
    'Register, change and delete webhook endpoints, rotate their secrets (:rotateSecret), move their cursors, read their delivery logs; it stands alone: no other scope implies it, and it implies none.',
} as const

/**
 * The OpenAPI 3.1 document, built by walking the routes and the user field rules that routing and
 * validation run on, so that it describes what the service does. Paths are relative to the one
 * server, the base path; root routes (probes) name the server root as their own server.
 */
export function createOpenApiDocument(options: OpenApiOptions): Json {
  const routes = options.routes ?? ROUTES
  const paths: Record<string, Record<string, unknown>> = {}
  for (const route of routes) {
    const item = paths[route.path] ?? pathItem(route, routes)
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
    servers: [
      {
        url: options.basePath === '' ? '/' : options.basePath,
        description: 'This service (its base path).',
      },
    ],
    tags: [
      { name: 'users', description: 'The user resource and its lifecycle.' },
      { name: 'service', description: 'Probes and this document; no token needed.' },
      { name: 'events', description: 'The change feed and audit trail, as pages or live.' },
      {
        name: 'webhooks',
        description:
          'Webhook endpoints: the change feed pushed to URLs, signed as Standard Webhooks says.',
      },
    ],
    paths,
    webhooks: createWebhookPayloads(),
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT (HS256, HS384 or HS512)',
          description:
            'A JWT whose space-separated scope claim holds the scopes an operation needs ' +
            '(none implies another). Security requirements name that scope, as OpenAPI 3.1 allows ' +
            'for http schemes; x-scopes lists them all.',
          'x-scopes': SCOPES,
        },
      },
      schemas: { ...createSchemas(), ...createEventSchemas(), ...createWebhookSchemas() },
      parameters: {
        RequestId: {
          name: 'X-Request-Id',
          in: 'header',
          required: false,
          schema: { type: 'string' },
          description:
            'Echoed when it is 1-128 characters of [A-Za-z0-9._-]; otherwise the service makes one.',
        },
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          schema: { type: 'string', minLength: 3, pattern: IDEMPOTENCY_KEY_PATTERN },
          description:
            'A key that makes the write safe to retry: one quoted string (an RFC 9651 String), 1-255 printable ASCII characters, a UUID recommended, such as "8e03978e-40d5-43e8-bc93-6894a57f9324"; parameters after it (;v=1) are ignored, and a list of keys ("a", "b") is refused. A retry with the same key, path, method and body gets the first answer again (Idempotent-Replayed: true) instead of a second change; the same key with another request is 422 idempotency_key_reused; while the first is in flight, 409 idempotency_key_in_use. Keys belong to the token subject and are kept IDEMPOTENCY_TTL_S seconds (24 hours by default) after a successful answer; a failed request keeps none. Malformed: 400 invalid_idempotency_key.',
        },
      },
      headers: createHeaders(),
      responses: createErrorResponses(uncountedStatuses(routes)),
    },
    'x-error-codes': ERROR_CODES,
  }
}

/** The error statuses of the root routes, which the rate limits never count. */
function uncountedStatuses(routes: readonly Route[]): Set<number> {
  return new Set(routes.filter((route) => route.root).flatMap((route) => errorStatuses(route)))
}

function describeService(): string {
  return (
    'Users over REST with HMAC-signed bearer tokens. ' +
    `Request bodies are at most ${MAX_BODY_BYTES} bytes. Every error is application/problem+json ` +
    'with a stable `code`; x-error-codes lists them all with their statuses. Any request may also ' +
    'be refused before routing (400 for a malformed request, 408, 417 for an Expect other than ' +
    '100-continue, 431). A method not listed for a path is 405 method_not_allowed with an Allow ' +
    'header; HEAD is answered wherever GET is; an ' +
    'unknown path is 404. Choices worth knowing: a 400 has code bad_request (a malformed ' +
    'Idempotency-Key: invalid_idempotency_key) and a detail naming what was wrong; 503s say ' +
    'maintenance, overloaded, starting, shutting_down or storage_unavailable, with Retry-After; ' +
    'the list routes (users, events, webhook endpoints and deliveries), the export and the import ' +
    'refuse an unknown, empty or repeated query parameter with a 400, and every other route ' +
    'ignores the query; the ETag is "v<version>"; an answer sent before the whole body arrived (a 413, say) closes the ' +
    'connection in stages; bodies of GET and DELETE are ignored; a lone surrogate in any string is ' +
    '422 invalid_characters; list cursors are signed with a key derived from the first JWT key; ' +
    'a q page examines at most LIST_SCAN_BUDGET users and may come back short, even empty, with a ' +
    'nextCursor: follow nextCursor until it is null. Patterns are over the value as sent, and ' +
    'read alike by ECMAScript (with or without the u flag) and by engines without Unicode ' +
    'property classes, such as Python re.'
  )
}

function pathItem(route: Route, routes: readonly Route[]): Record<string, unknown> {
  const methods = routes.filter((other) => other.path === route.path).map((other) => other.method)
  return {
    description:
      `Allows ${[...methods, ...(methods.includes('GET') ? ['HEAD'] : [])].join(', ')}; ` +
      'any other method is 405 method_not_allowed with an Allow header.',
    ...(route.root
      ? { servers: [{ url: '/', description: 'The server root, outside the base path.' }] }
      : {}),
  }
}
