import type { Scope } from '../auth/authenticate.js'

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

/**
 * What a route's request body may be. `stream`: the handler reads the body itself, as it arrives
 * (an import), instead of the 64 KiB JSON reader.
 */
export type BodyRule = 'none' | 'required' | 'optional' | 'stream'

/** One row of the route table: routing, permission, body rules and documentation in one place. */
export interface RouteSpec {
  readonly operationId: string
  readonly method: Method
  /** A template: literal segments, `{param}`, or `{param}:verb` for a custom method. */
  readonly path: string
  /** True for routes at the server root, outside `BASE_PATH` (probes look for them there). */
  readonly root: boolean
  readonly scope: Scope | undefined
  readonly body: BodyRule
  readonly mediaTypes: readonly string[]
  /** Successful GETs may be stored privately and revalidated; everything else is `no-store`. */
  readonly cacheable: boolean
  /** The route takes `If-Match` (writes) or `If-None-Match` (reads). */
  readonly conditional: boolean
  readonly status: 200 | 201 | 204
  readonly summary: string
}

const JSON_ONLY = ['application/json'] as const
const MERGE_PATCH = ['application/merge-patch+json', 'application/json'] as const

const users = {
  root: false,
  body: 'none',
  mediaTypes: [],
  cacheable: false,
  conditional: false,
  status: 200,
} as const

const probe = { ...users, root: true, scope: undefined } as const

/** Every route the service answers; the router, the scope check and the OpenAPI document read it. */
export const ROUTES = [
  {
    ...users, operationId: 'listUsers', method: 'GET', path: '/users', scope: 'users:read',
    cacheable: true, summary: 'List users, a page at a time',
  },
  {
    ...users, operationId: 'createUser', method: 'POST', path: '/users', scope: 'users:write',
    body: 'required', mediaTypes: JSON_ONLY, status: 201, summary: 'Create a user',
  },
  {
    ...users, operationId: 'exportUsers', method: 'GET', path: '/users:export', scope: 'users:admin',
    summary: 'Every user as NDJSON, one per line, streamed',
  },
  {
    ...users, operationId: 'importUsers', method: 'POST', path: '/users:import', scope: 'users:admin',
    body: 'stream', mediaTypes: ['application/x-ndjson'],
    summary: 'Import users from NDJSON; one result line per input line, streamed',
  },
  {
    ...users, operationId: 'getUser', method: 'GET', path: '/users/{id}', scope: 'users:read',
    cacheable: true, conditional: true, summary: 'Read a user',
  },
  {
    ...users, operationId: 'replaceUser', method: 'PUT', path: '/users/{id}', scope: 'users:write',
    body: 'required', mediaTypes: JSON_ONLY, conditional: true, summary: 'Replace a user',
  },
  {
    ...users, operationId: 'updateUser', method: 'PATCH', path: '/users/{id}', scope: 'users:write',
    body: 'required', mediaTypes: MERGE_PATCH, conditional: true,
    summary: 'Change some fields of a user (JSON Merge Patch)',
  },
  {
    ...users, operationId: 'deleteUser', method: 'DELETE', path: '/users/{id}', scope: 'users:write',
    conditional: true, status: 204, summary: 'Delete a user',
  },
  {
    ...users, operationId: 'activateUser', method: 'POST', path: '/users/{id}:activate',
    scope: 'users:admin', body: 'optional', mediaTypes: JSON_ONLY, conditional: true,
    summary: 'Activate a pending or suspended user',
  },
  {
    ...users, operationId: 'suspendUser', method: 'POST', path: '/users/{id}:suspend',
    scope: 'users:admin', body: 'optional', mediaTypes: JSON_ONLY, conditional: true,
    summary: 'Suspend an active user',
  },
  {
    ...users, operationId: 'listEvents', method: 'GET', path: '/events', scope: 'events:read',
    summary: 'Read the change feed, a page at a time or live (Accept: text/event-stream)',
  },
  { ...users, operationId: 'getOpenApi', method: 'GET', path: '/openapi.json', scope: undefined, summary: 'This OpenAPI document' },
  { ...probe, operationId: 'getHealth', method: 'GET', path: '/healthz', summary: 'Liveness: 200 while the process runs' },
  { ...probe, operationId: 'getReadiness', method: 'GET', path: '/readyz', summary: 'Readiness: 200 when the service takes traffic' },
  { ...probe, operationId: 'getMetrics', method: 'GET', path: '/metrics', summary: 'Metrics in the Prometheus text format (METRICS=off hides it)' },
] as const satisfies readonly RouteSpec[]

export type OperationId = (typeof ROUTES)[number]['operationId']
