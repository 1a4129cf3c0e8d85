import { HttpError } from './problem.js'
import type { RouteSpec } from './route-spec.js'

type Segment =
  | { readonly kind: 'literal'; readonly text: string }
  /** A collection custom method (`users:export`): the whole segment, colon included, as written. */
  | { readonly kind: 'method'; readonly text: string }
  | { readonly kind: 'param'; readonly name: string; readonly verb: string | undefined }

/** Routes that share one path template, by method. */
interface PathEntry<R extends RouteSpec> {
  readonly template: string
  readonly segments: readonly Segment[]
  readonly byMethod: ReadonlyMap<string, R>
  readonly allow: string
  readonly exists: RouteSpec['exists']
}

export interface RouteMatch<R extends RouteSpec> {
  readonly route: R
  /** Parameters exactly as sent, still percent-encoded; a fresh null-prototype object. */
  readonly rawParams: Record<string, string>
}

export interface Router<R extends RouteSpec> {
  /** The route for a method and a raw path (no query), or a 404 / 405 HttpError. */
  match(method: string, rawPath: string): RouteMatch<R>
}

const PARAM = /^\{([A-Za-z][A-Za-z0-9]*)\}(?::([a-z][A-Za-z0-9]*))?$/
const LITERAL = /^[A-Za-z0-9._~-]+$/
const LITERAL_VERB = /^[A-Za-z0-9._~-]+:[a-z][A-Za-z0-9]*$/

/**
 * Compiles the route table once; a template it cannot understand fails here, at start. Matching
 * splits the raw path on `/` and finds a `:verb` only at a literal colon, before anything is
 * decoded, so an encoded `%3A` stays part of the parameter.
 */
export function createRouter<R extends RouteSpec>(routes: readonly R[], basePath = ''): Router<R> {
  const entries = compile(routes, basePath)

  return {
    match(method, rawPath) {
      const parts = rawPath.split('/')
      // A path always starts with '/', so parts[0] is '' and the segments follow.
      if (parts[0] !== '') throw notFound()
      for (const entry of entries) {
        const rawParams = matchSegments(entry.segments, parts)
        if (rawParams === undefined || entry.exists?.(rawParams) === false) continue
        // HEAD is answered as GET (RFC 9110 §9.3.2), its refusal too: the same length.
        const asked = method === 'HEAD' ? 'GET' : method
        const route = entry.byMethod.get(asked)
        if (route === undefined) {
          throw new HttpError(
            'method_not_allowed',
            `${asked} is not allowed on ${entry.template}.`,
            {
              headers: { allow: entry.allow },
            },
          )
        }
        return { route, rawParams }
      }
      throw notFound()
    },
  }
}

function notFound(): HttpError {
  return new HttpError('not_found', 'There is nothing at this path.')
}

function compile<R extends RouteSpec>(routes: readonly R[], basePath: string): PathEntry<R>[] {
  const byTemplate = new Map<string, Map<string, R>>()
  for (const route of routes) {
    const template = route.root ? route.path : `${basePath}${route.path}`
    const methods = byTemplate.get(template) ?? new Map<string, R>()
    if (methods.has(route.method))
      throw new Error(`route ${route.method} ${template} is defined twice`)
    methods.set(route.method, route)
    byTemplate.set(template, methods)
  }
  return [...byTemplate].map(([template, byMethod]) => {
    const methods = [...byMethod.keys()]
    if (byMethod.has('GET')) methods.push('HEAD')
    const exists = [...byMethod.values()].find((route) => route.exists !== undefined)?.exists
    const segments = parseTemplate(template)
    return { template, segments, byMethod, allow: methods.join(', '), exists }
  })
}

function parseTemplate(template: string): Segment[] {
  if (!template.startsWith('/')) throw new Error(`route template "${template}" must start with /`)
  return template
    .slice(1)
    .split('/')
    .map((part): Segment => {
      const param = PARAM.exec(part)
      // Stryker disable next-line StringLiteral: matching treats every kind other than literal and method as a parameter
      if (param?.[1] !== undefined) return { kind: 'param', name: param[1], verb: param[2] }
      if (LITERAL.test(part)) return { kind: 'literal', text: part }
      if (LITERAL_VERB.test(part)) return { kind: 'method', text: part }
      throw new Error(`route template "${template}" has a bad segment "${part}"`)
    })
}

function matchSegments(
  segments: readonly Segment[],
  parts: readonly string[],
): Record<string, string> | undefined {
  if (parts.length !== segments.length + 1) return undefined
  let params: Record<string, string> | undefined
  for (let i = 0; i < segments.length; i += 1) {
    const segment = segments[i]
    const part = parts[i + 1]
    // Stryker disable next-line ConditionalExpression,LogicalOperator: unreachable after the length check; it only satisfies noUncheckedIndexedAccess
    if (segment === undefined || part === undefined) return undefined
    // A literal matches only itself: `users%3Aexport` is neither `users` nor `users:export`.
    if (segment.kind === 'literal' || segment.kind === 'method') {
      if (part !== segment.text) return undefined
      continue
    }
    const colon = part.indexOf(':')
    let value = part
    if (segment.verb === undefined) {
      if (colon !== -1) return undefined
    } else {
      if (colon === -1 || part.slice(colon + 1) !== segment.verb) return undefined
      value = part.slice(0, colon)
    }
    if (value === '') return undefined
    // Parameter names come from the route table, never from the request.
    params ??= emptyParams()
    params[segment.name] = value
  }
  return params ?? emptyParams()
}

/**
 * A fresh null-prototype object that V8 keeps in fast mode: Object.create(null) makes a
 * dictionary-mode object, whose every store, lookup and for-in costs a hash probe on the hot path.
 */
function emptyParams(): Record<string, string> {
  return Object.setPrototypeOf({}, null) as Record<string, string>
}
