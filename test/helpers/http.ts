import assert from 'node:assert/strict'

import type { User } from '../../src/domain/user.js'
import type { FieldError } from '../../src/http/problem.js'

export interface TestResponse {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  /** The parsed body when the answer is JSON (undefined otherwise). */
  readonly body: unknown
  /** The parsed body as the shape the caller expects. */
  json<T>(): T
}

export interface Problem {
  type: string
  title: string
  status: number
  detail: string
  code: string
  requestId: string
  errors?: FieldError[]
  /** `unknown` when the refused change may still have been made. */
  outcome?: string
}

export interface UserPage {
  items: User[]
  nextCursor: string | null
}

export interface RequestOptions {
  token?: string | undefined
  json?: unknown
  body?: string | Uint8Array
  contentType?: string
  headers?: Record<string, string>
}

/** One request with fetch; `url` is absolute. */
export async function request(
  method: string,
  url: string,
  options: RequestOptions = {},
): Promise<TestResponse> {
  const headers: Record<string, string> = { ...options.headers }
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`
  let body = options.body
  if (options.json !== undefined) {
    body = JSON.stringify(options.json)
    headers['content-type'] = 'application/json'
  }
  if (options.contentType !== undefined) headers['content-type'] = options.contentType
  const res = await fetch(url, {
    method,
    headers,
    ...(body === undefined ? {} : { body }),
    redirect: 'manual',
  })
  const text = await res.text()
  const type = res.headers.get('content-type') ?? ''
  const parsed: unknown = text !== '' && /json/.test(type) ? JSON.parse(text) : undefined
  return {
    status: res.status,
    headers: res.headers,
    text,
    body: parsed,
    json: <T>() => parsed as T,
  }
}

/** Asserts a problem+json answer with a status and (when given) a code; returns the problem. */
export function assertProblem(res: TestResponse, status: number, code?: string): Problem {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${res.text}`)
  assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/)
  const problem = res.json<Problem>()
  if (code !== undefined) assert.equal(problem.code, code, res.text)
  assert.equal(problem.status, status)
  for (const member of ['type', 'title', 'detail', 'code', 'requestId'] as const) {
    assert.equal(typeof problem[member], 'string', `problem member ${member}: ${res.text}`)
  }
  assert.equal(problem.requestId, res.headers.get('x-request-id'))
  return problem
}

/** Asserts a 422 with an entry for each pointer; returns the problem. */
export function assertValidation(res: TestResponse, pointers: readonly string[]): Problem {
  const problem = assertProblem(res, 422, 'validation_failed')
  const errors = problem.errors ?? []
  assert.ok(errors.length > 0, `422 without errors[]: ${res.text}`)
  for (const pointer of pointers) {
    assert.ok(
      errors.some(
        (entry) =>
          entry.pointer === pointer ||
          (pointer.endsWith('*') && entry.pointer.startsWith(pointer.slice(0, -1))),
      ),
      `no error at ${pointer}: ${res.text}`,
    )
  }
  return problem
}
