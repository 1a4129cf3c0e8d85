/**
 * A tiny fetch wrapper typed by the `paths` that openapi-typescript generates from /openapi.json
 * (openapi-fetch does the same with more options). Calls name a path and a method of the document;
 * answers are a union over the documented statuses, so checking `status` narrows the body and the
 * headers (`Location`, `ETag`, `Link`...).
 */
import type { paths } from './schema.js'

type Method = 'get' | 'put' | 'post' | 'delete' | 'patch'
type Path = keyof paths

/** The paths that document method M. */
export type PathWith<M extends Method> = {
  [P in Path]: paths[P] extends Record<M, unknown> ? P : never
}[Path]
type Operation<P extends Path, M extends Method> = paths[P] extends Record<M, infer O> ? O : never

type ParamsOf<O> = O extends { parameters: infer P } ? P : never
type BodyOf<O> = O extends { requestBody?: never }
  ? undefined
  : O extends { requestBody: { content: infer C } }
    ? C[keyof C]
    : O extends { requestBody?: { content: infer C } }
      ? C[keyof C] | undefined
      : undefined
type ResponsesOf<O> = O extends { responses: infer R } ? R : never
type ContentOf<R> = R extends { content: infer C } ? C[keyof C] : undefined
type HeadersOf<R> = R extends { headers: infer H } ? H : Record<string, unknown>

/** One documented answer per status: narrowing on `status` types `headers` and `body`. */
export type TypedResponse<O> = {
  [S in keyof ResponsesOf<O>]: {
    status: S
    headers: HeadersOf<ResponsesOf<O>[S]>
    body: ContentOf<ResponsesOf<O>[S]>
  }
}[keyof ResponsesOf<O>]

export interface RequestInit<O> {
  params: ParamsOf<O>
  body?: BodyOf<O>
}

interface LooseParams {
  path?: Record<string, string>
  query?: Record<string, string | number>
  header?: Record<string, string>
}

export interface ClientOptions {
  /** Origin plus base path, e.g. http://127.0.0.1:8080/v1: the document's server. */
  baseUrl: string
  token?: string
}

export interface Client {
  GET<P extends PathWith<'get'>>(
    path: P,
    init: RequestInit<Operation<P, 'get'>>,
  ): Promise<TypedResponse<Operation<P, 'get'>>>
  POST<P extends PathWith<'post'>>(
    path: P,
    init: RequestInit<Operation<P, 'post'>>,
  ): Promise<TypedResponse<Operation<P, 'post'>>>
  PUT<P extends PathWith<'put'>>(
    path: P,
    init: RequestInit<Operation<P, 'put'>>,
  ): Promise<TypedResponse<Operation<P, 'put'>>>
  PATCH<P extends PathWith<'patch'>>(
    path: P,
    init: RequestInit<Operation<P, 'patch'>>,
  ): Promise<TypedResponse<Operation<P, 'patch'>>>
  DELETE<P extends PathWith<'delete'>>(
    path: P,
    init: RequestInit<Operation<P, 'delete'>>,
  ): Promise<TypedResponse<Operation<P, 'delete'>>>
}

export function createClient(options: ClientOptions): Client {
  const call = async (
    method: string,
    path: string,
    init: { params: unknown; body?: unknown },
  ): Promise<never> => {
    const params = init.params as LooseParams
    const url = new URL(
      options.baseUrl.replace(/\/$/, '') +
        path.replace(/\{(\w+)\}/g, (_, name: string) =>
          encodeURIComponent(params.path?.[name] ?? ''),
        ),
    )
    for (const [name, value] of Object.entries(params.query ?? {}))
      url.searchParams.set(name, String(value))
    const headers: Record<string, string> = { ...params.header }
    if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`
    if (init.body !== undefined)
      headers['content-type'] =
        method === 'PATCH' ? 'application/merge-patch+json' : 'application/json'
    const res = await fetch(url, {
      method,
      headers,
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    })
    const text = await res.text()
    const body: unknown = text === '' ? undefined : JSON.parse(text)
    // Header names are case-insensitive on the wire and spelled as documented in the types.
    const typedHeaders = new Proxy(
      {},
      {
        get: (_target, name) =>
          typeof name === 'string' ? (res.headers.get(name) ?? undefined) : undefined,
      },
    )
    // The one unchecked step, as in any generated client: the answer is trusted to follow the document.
    return { status: res.status, headers: typedHeaders, body } as never
  }
  return {
    GET: (path, init) => call('GET', path, init),
    POST: (path, init) => call('POST', path, init),
    PUT: (path, init) => call('PUT', path, init),
    PATCH: (path, init) => call('PATCH', path, init),
    DELETE: (path, init) => call('DELETE', path, init),
  }
}
