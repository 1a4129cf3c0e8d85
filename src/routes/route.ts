import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'

import type { Scope } from '../auth/authenticate.js'
import type { TokenClaims } from '../auth/verify-token.js'
import type { ChangeContext } from '../domain/change-context.js'
import type { PendingKey } from '../domain/kept-key.js'
import type { Preconditions } from '../domain/preconditions.js'
import type { UserRecord } from '../domain/user.js'
import type { Reply } from '../http/respond.js'
import type { BodyRule, RouteSpec } from '../http/route-spec.js'
import type { Intent } from '../ops/availability.js'
import type { StorageFaultLog } from '../ops/storage-faults.js'
import type { RouteServices } from './route-services.js'

export type { BodyRule, Method } from '../http/route-spec.js'

export type Json = Readonly<Record<string, unknown>>

/** What a handler sees of a request that passed routing, the token check and the body rules. */
export interface RouteContext {
  readonly req: IncomingMessage
  /** For a handler that writes its answer itself (a stream); the others return a Reply. */
  readonly res: ServerResponse
  /** Path parameters, percent-decoded. */
  readonly params: Readonly<Record<string, string>>
  /** The query string as sent, without the `?` ('' when there is none). */
  readonly rawQuery: string
  /** The parsed JSON body; undefined when the route takes none, streams it, or it was empty. */
  readonly body: unknown
  readonly headers: IncomingHttpHeaders
  /**
   * If-Match and If-None-Match as sent: a tagged write hands them to its operation, an untagged
   * write or stream checks them itself (checkUntagged); a read's are applied to its answer for it.
   */
  readonly preconditions: Preconditions
  readonly requestId: string
  /** Who makes the request: the token's subject and the request id, for the events of its writes. */
  readonly change: ChangeContext
  /**
   * The request's `Idempotency-Key` on a route that takes one (`idempotencyKey`), free and held:
   * the handler hands it to its change with the answer it will give (keyedChange).
   */
  readonly key: PendingKey | undefined
  /** The verified token; undefined on a route without a scope. */
  readonly claims: TokenClaims | undefined
  /** CORS headers as a flat name/value list for every answer; undefined when CORS is off. */
  readonly cors: readonly string[] | undefined
  /**
   * The user a route that declares `readsUser` reads, looked up with the token's subject check in
   * one store call (throws not_found when there is none); undefined when it was not (no subject to
   * check, or an id that is not canonical as sent): the handler reads it itself.
   */
  readonly readUser: (() => UserRecord) | undefined
  /** The storage fault log, for a handler that meets faults without throwing them (an import). */
  readonly faults: StorageFaultLog
  readonly services: RouteServices
}

/** The handler wrote its answer itself (a stream, or nothing when the client had gone). */
export const STREAMED = 'streamed' as const

export type Answer = Reply | typeof STREAMED

/** One handler shape for every route, streams included. */
export type RouteHandler = (context: RouteContext) => Answer | Promise<Answer>

/** One documented success answer; X-Request-Id and the cache headers are added to every one. */
export interface ResponseDoc {
  readonly description: string
  /** Names in components.headers the answer also carries (ETag, Location, Link). */
  readonly headers?: readonly string[]
  /** Media type → schema of the body; none: no body. */
  readonly content?: Readonly<Record<string, Json>>
}

/**
 * Everything about one operation, declared once: the router, the availability and scope checks,
 * the body reader, the handler call and the OpenAPI document all read this value.
 */
export interface Route extends RouteSpec {
  readonly scope: Scope | undefined
  readonly body: BodyRule
  readonly mediaTypes: readonly string[]
  /**
   * Whether the route takes an `Idempotency-Key` (docs/api.md, safe retries): the writes of a
   * user. Every other route ignores the header.
   */
  readonly idempotencyKey?: boolean
  /**
   * The path parameter naming the one user the route reads, for a route whose work is that read:
   * the read and the token's subject check are made together (UserOperations.getAs, one statement
   * on PostgreSQL) and the handler finds the user in `readUser`.
   */
  readonly readsUser?: string
  /** Successful GETs may be stored privately and revalidated; everything else is `no-store`. */
  readonly cacheable: boolean
  /**
   * Its resource has an `ETag` (a user, an endpoint): a read's answer carries it and a write's
   * operation compares If-Match and If-None-Match with it under the store's lock. Any other route's
   * resource has none: only `*` matches, on a read's answer (app.ts) or by its handler before it
   * acts or streams (checkUntagged). Every route evaluates both headers (RFC 9110 §13.2.1).
   */
  readonly tagged: boolean
  /** What it asks of availability; default `read` for GET and `write` for the other methods. */
  readonly intent?: Intent
  readonly summary: string
  readonly tag: 'users' | 'events' | 'webhooks' | 'service'
  /** Query and header parameters beyond the path's, the conditional headers and X-Request-Id. */
  readonly parameters?: readonly Json[]
  /** The request body's schema (for each of mediaTypes) and, if any, a description. */
  readonly request?: { readonly schema: Json; readonly description?: string }
  /** The success answers by status. */
  readonly responses: Readonly<Record<number, ResponseDoc>>
  /**
   * Error statuses beyond those its other fields imply (a scope: 401 and 403; a body: 413 and 415,
   * and 422 unless it is streamed; a path parameter: 404; every route: 412; not root: 503).
   */
  readonly errors?: readonly number[]
  readonly handle: RouteHandler
}

/** The route's intent for availability. */
export function intentOf(route: Route): Intent {
  return route.intent ?? (route.method === 'GET' ? 'read' : 'write')
}

/** A JSON Schema reference into components.schemas. */
export function ref(name: string): Json {
  return { $ref: `#/components/schemas/${name}` }
}
