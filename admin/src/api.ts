import { readProblem, type ShownProblem } from './problem.js'
import { isUser, readJson, type User, writeJson } from './user-view.js'

/** An answer of the API: the user or page on success, the problem otherwise. */
export type Answer<T> =
  | { readonly ok: true; readonly value: T; readonly etag: string }
  | { readonly ok: false; readonly problem: ShownProblem }

export interface UserPage {
  readonly items: readonly User[]
  readonly nextCursor: string | null
}

const KEY = 'user-service.token'

/** The token lives in this tab's sessionStorage only: closing the tab forgets it. */
export const session = {
  token: (): string | null => sessionStorage.getItem(KEY),
  keep: (token: string): void => sessionStorage.setItem(KEY, token),
  forget: (): void => sessionStorage.removeItem(KEY),
}

/** A token that a header cannot carry (a character past Latin-1, such as a copy's "…"). */
export function isSendable(token: string): boolean {
  try {
    new Headers({ authorization: `Bearer ${token}` })
    return true
  } catch {
    return false
  }
}

// The answer of a call that never reached the service, shown as a problem of the page's own.
function failed(
  code: string,
  title: string,
  detail: string,
): { ok: false; status: number; etag: string; body: unknown } {
  return { ok: false, status: 0, etag: '', body: { code, title, detail } }
}

const UNSENDABLE =
  'The token holds a character a request header cannot carry (a shortened copy ends in "…"): ' +
  'paste the whole token again.'
// A read changed nothing; a write may have reached the service before the connection failed.
const UNREACHED_READ = 'The service could not be reached. Nothing is known to have changed.'
const UNREACHED_WRITE =
  'The service could not be reached, so whether the change was made is unknown: reload the ' +
  'page to see the current state.'

/**
 * Calls the API with the token, through URLs relative to the page (`users` beside `admin`, so that
 * a base path needs nothing here), and reads the answer. A call that cannot be sent or gets no
 * answer is answered as a problem with status 0, so that every caller shows it as any other.
 */
async function call(
  method: string,
  path: string,
  options: { body?: unknown; ifMatch?: string; contentType?: string; token?: string } = {},
): Promise<{ ok: boolean; status: number; etag: string; body: unknown }> {
  const token = options.token ?? session.token() ?? ''
  if (!isSendable(token)) return failed('token_unsendable', 'Token cannot be sent', UNSENDABLE)
  const headers: Record<string, string> = {
    authorization: `Bearer ${token}`,
    accept: 'application/json',
  }
  if (options.ifMatch !== undefined) headers['if-match'] = options.ifMatch
  let body: string | null = null
  if (options.body !== undefined) {
    headers['content-type'] = options.contentType ?? 'application/json'
    body = writeJson(options.body)
  }
  let res: Response
  let text: string
  try {
    res = await fetch(path, { method, headers, body, cache: 'no-store' })
    text = await res.text()
  } catch {
    const detail = method === 'GET' ? UNREACHED_READ : UNREACHED_WRITE
    return failed('unreachable', 'No answer from the service', detail)
  }
  let parsed: unknown
  try {
    parsed = text === '' ? undefined : readJson(text)
  } catch {
    parsed = undefined
  }
  return { ok: res.ok, status: res.status, etag: res.headers.get('etag') ?? '', body: parsed }
}

async function userAnswer(
  method: string,
  path: string,
  options: { body?: unknown; ifMatch?: string; contentType?: string } = {},
): Promise<Answer<User>> {
  const res = await call(method, path, options)
  if (res.ok && isUser(res.body)) return { ok: true, value: res.body, etag: res.etag }
  return { ok: false, problem: readProblem(res.status, res.body) }
}

const item = (id: string): string => `users/${encodeURIComponent(id)}`

export const api = {
  /** The first page of the list; `token`: one being tried at sign-in, not yet kept. */
  async list(
    query: { q: string; cursor: string | undefined },
    token?: string,
  ): Promise<Answer<UserPage>> {
    const params = new URLSearchParams()
    if (query.cursor === undefined) {
      params.set('sort', '-createdAt')
      params.set('limit', '20')
      if (query.q !== '') params.set('q', query.q)
    } else {
      // A cursor carries its filters and sort; the limit may be sent again.
      params.set('cursor', query.cursor)
      params.set('limit', '20')
    }
    const res = await call(
      'GET',
      `users?${params.toString()}`,
      token === undefined ? {} : { token },
    )
    if (res.ok && typeof res.body === 'object' && res.body !== null) {
      const page = res.body as UserPage
      return {
        ok: true,
        value: { items: page.items.filter(isUser), nextCursor: page.nextCursor },
        etag: '',
      }
    }
    return { ok: false, problem: readProblem(res.status, res.body) }
  },
  get: (id: string) => userAnswer('GET', item(id)),
  create: (body: unknown) => userAnswer('POST', 'users', { body }),
  // PUT: the form holds every writable field, so a metadata key deleted in it goes too.
  replace: (id: string, body: unknown, ifMatch: string) =>
    userAnswer('PUT', item(id), { body, ifMatch }),
  transition: (id: string, verb: 'activate' | 'suspend', ifMatch: string) =>
    userAnswer('POST', `${item(id)}:${verb}`, { ifMatch }),
  async remove(id: string, ifMatch: string): Promise<Answer<null>> {
    const res = await call('DELETE', item(id), { ifMatch })
    if (res.ok) return { ok: true, value: null, etag: '' }
    return { ok: false, problem: readProblem(res.status, res.body) }
  },
}
