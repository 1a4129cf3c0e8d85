export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

/**
 * What a route's request body may be. `stream`: the handler reads the body itself, as it arrives
 * (an import), instead of the 64 KiB JSON reader.
 */
export type BodyRule = 'none' | 'required' | 'optional' | 'stream'

/**
 * What the HTTP layer reads of a route: the router, CORS, the metrics and the preconditions. The
 * whole route (scope, handler, documentation) is `Route` in routes/route.ts, which extends this.
 */
export interface RouteSpec {
  readonly operationId: string
  readonly method: Method
  /** A template: literal segments, `{param}`, or `{param}:verb` for a custom method. */
  readonly path: string
  /** True for routes at the server root, outside `BASE_PATH` (probes look for them there). */
  readonly root: boolean
  /**
   * For a template whose parameters may name nothing at all (a file of the admin page): false
   * makes the path an unknown one, a route 404 for every method, before anything counts it.
   */
  readonly exists?: ((rawParams: Readonly<Record<string, string>>) => boolean) | undefined
}
