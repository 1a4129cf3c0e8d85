import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import { checkUntagged, NO_PRECONDITIONS } from '../../src/domain/preconditions.js'
import { answerConditionalRead, readPreconditions } from '../../src/http/conditional-request.js'
import { HttpError, toHttpError } from '../../src/http/problem.js'
import type { RouteSpec } from '../../src/http/route-spec.js'
import type { Route } from '../../src/routes/route.js'
import { ROUTES } from '../../src/routes/route-list.js'
import { assertProblem, type RequestOptions } from '../helpers/http.js'
import { startService, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const SRC = path.join(import.meta.dirname, '..', '..', 'src')
const STALE = '"never-this-tag"'

function spec(method: 'GET' | 'PATCH' = 'GET'): RouteSpec {
  return { operationId: 'x', method, path: '/x/{id}', root: false }
}

/** Runs `run` and returns the error it throws. */
function thrown(run: () => unknown): Error {
  try {
    run()
  } catch (error) {
    assert.ok(error instanceof Error)
    return error
  }
  assert.fail('expected a refusal')
}

describe('readPreconditions', () => {
  it('gives If-Match and If-None-Match as sent, and no preconditions when neither was', () => {
    assert.deepEqual(readPreconditions({ 'if-match': STALE, 'if-none-match': '*' }), {
      ifMatch: STALE,
      ifNoneMatch: '*',
    })
    assert.deepEqual(readPreconditions({ 'if-none-match': '"a", "b"' }), {
      ifMatch: undefined,
      ifNoneMatch: '"a", "b"',
    })
    assert.equal(readPreconditions({}), NO_PRECONDITIONS)
  })

  it('refuses an empty or blank header with 400 bad_request naming it', () => {
    for (const [name, label] of [
      ['if-match', 'If-Match'],
      ['if-none-match', 'If-None-Match'],
    ] as const) {
      for (const value of ['', ' \t ']) {
        const error = thrown(() => readPreconditions({ [name]: value }))
        assert.ok(error instanceof HttpError)
        assert.equal(error.status, 400)
        assert.equal(error.code, 'bad_request')
        assert.equal(error.detail, `The header ${label} is empty.`)
      }
    }
  })
})

describe('answerConditionalRead', () => {
  const found = { status: 200, body: '{}', etag: '"v3"' }

  it('answers a failing If-Match 412 precondition_failed, before a matching If-None-Match', () => {
    const error = thrown(() =>
      answerConditionalRead(spec(), { ifMatch: '"v2"', ifNoneMatch: '"v3"' }, found),
    )
    const answer = toHttpError(error)
    assert.equal(answer.status, 412)
    assert.equal(answer.code, 'precondition_failed')
    assert.equal(answer.detail, 'A precondition does not hold for the current ETag "v3".')
  })

  it('answers a matching If-None-Match (weak, a list, or *) 304 with the ETag and no body', () => {
    for (const ifNoneMatch of ['"v3"', 'W/"v3"', '"a", "v3"', '*']) {
      assert.deepEqual(answerConditionalRead(spec(), { ifMatch: undefined, ifNoneMatch }, found), {
        status: 304,
        etag: '"v3"',
      })
    }
  })

  it('leaves the answer alone when the preconditions hold, on an error, and on writes', () => {
    const holds = { ifMatch: '"v3"', ifNoneMatch: '"v2"' }
    assert.equal(answerConditionalRead(spec(), holds, found), found)
    assert.equal(answerConditionalRead(spec(), NO_PRECONDITIONS, found), found)
    const star = { ifMatch: undefined, ifNoneMatch: '*' }
    const created = { status: 201, body: '{}', etag: '"v1"' }
    assert.equal(answerConditionalRead(spec(), star, created), created)
    assert.equal(answerConditionalRead(spec('PATCH'), star, found), found)
  })

  it('holds only * for an answer without an ETag: a tag in If-Match is 412, If-None-Match: * is 304', () => {
    const list = { status: 200, body: '{"items":[]}' }
    const error = toHttpError(
      thrown(() => answerConditionalRead(spec(), { ifMatch: STALE, ifNoneMatch: undefined }, list)),
    )
    assert.equal(error.status, 412)
    assert.equal(error.code, 'precondition_failed')
    assert.match(error.detail, /has no ETag/)
    assert.deepEqual(
      answerConditionalRead(spec(), { ifMatch: undefined, ifNoneMatch: '*' }, list),
      {
        status: 304,
      },
    )
    for (const holds of [
      { ifMatch: '*', ifNoneMatch: undefined },
      { ifMatch: undefined, ifNoneMatch: `${STALE}, W/"v1"` },
      { ifMatch: '*', ifNoneMatch: STALE },
    ]) {
      assert.equal(answerConditionalRead(spec(), holds, list), list, JSON.stringify(holds))
    }
  })
})

describe('checkUntagged', () => {
  it('passes without preconditions, with If-Match: *, and with If-None-Match naming tags', () => {
    assert.equal(checkUntagged(NO_PRECONDITIONS, false), 'pass')
    assert.equal(checkUntagged({ ifMatch: '*', ifNoneMatch: undefined }, false), 'pass')
    assert.equal(checkUntagged({ ifMatch: undefined, ifNoneMatch: STALE }, true), 'pass')
  })

  it('throws 412 for a tag in If-Match, and for If-None-Match: * on a write; a read gets not_modified', () => {
    for (const [conditions, safe] of [
      [{ ifMatch: STALE, ifNoneMatch: undefined }, false],
      [{ ifMatch: STALE, ifNoneMatch: '*' }, true],
      [{ ifMatch: undefined, ifNoneMatch: '*' }, false],
    ] as const) {
      const error = toHttpError(thrown(() => checkUntagged(conditions, safe)))
      assert.equal(error.status, 412, JSON.stringify(conditions))
      assert.equal(error.code, 'precondition_failed')
    }
    assert.equal(checkUntagged({ ifMatch: '*', ifNoneMatch: '*' }, true), 'not_modified')
  })
})

/** One request to a route, built afresh for each call (a create needs a new email). */
type Call = (id: string) => [method: string, target: string, options: RequestOptions]

const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })
const hooks = makeToken({ sub: 'hooks-admin', scope: 'webhooks:admin' })
/** The webhook endpoint the webhook routes' requests name, made with the test's service. */
let hookId = ''

/** Every route of the table, with a request it answers and the status of that answer. */
const CALLS: Readonly<Record<string, { call: Call; status: number }>> = {
  listUsers: { call: () => ['GET', '/users', {}], status: 200 },
  createUser: {
    call: () => ['POST', '/users', { json: { email: uniqueEmail(), name: 'New' } }],
    status: 201,
  },
  exportUsers: { call: () => ['GET', '/users:export', {}], status: 200 },
  importUsers: {
    call: () => [
      'POST',
      '/users:import',
      {
        body: `${JSON.stringify({ email: uniqueEmail(), name: 'Imported' })}\n`,
        contentType: 'application/x-ndjson',
      },
    ],
    status: 200,
  },
  getUser: { call: (id) => ['GET', `/users/${id}`, {}], status: 200 },
  replaceUser: {
    call: (id) => ['PUT', `/users/${id}`, { json: { email: uniqueEmail(), name: 'Put' } }],
    status: 200,
  },
  updateUser: { call: (id) => ['PATCH', `/users/${id}`, { json: { name: 'Patch' } }], status: 200 },
  deleteUser: { call: (id) => ['DELETE', `/users/${id}`, {}], status: 204 },
  activateUser: { call: (id) => ['POST', `/users/${id}:activate`, {}], status: 200 },
  suspendUser: { call: (id) => ['POST', `/users/${id}:suspend`, {}], status: 200 },
  revokeTokens: { call: (id) => ['POST', `/users/${id}:revokeTokens`, {}], status: 200 },
  listEvents: { call: () => ['GET', '/events', { token: reader }], status: 200 },
  listWebhooks: { call: () => ['GET', '/webhooks', { token: hooks }], status: 200 },
  createWebhook: {
    call: () => ['POST', '/webhooks', { token: hooks, json: { url: 'https://a.example.com' } }],
    status: 201,
  },
  getWebhook: { call: () => ['GET', `/webhooks/${hookId}`, { token: hooks }], status: 200 },
  updateWebhook: {
    call: () => ['PATCH', `/webhooks/${hookId}`, { token: hooks, json: { description: 'x' } }],
    status: 200,
  },
  deleteWebhook: { call: () => ['DELETE', `/webhooks/${hookId}`, { token: hooks }], status: 204 },
  rotateWebhookSecret: {
    call: () => ['POST', `/webhooks/${hookId}:rotateSecret`, { token: hooks }],
    status: 200,
  },
  listWebhookDeliveries: {
    call: () => ['GET', `/webhooks/${hookId}/deliveries`, { token: hooks }],
    status: 200,
  },
  getWebhookCursor: {
    call: () => ['GET', `/webhooks/${hookId}/cursor`, { token: hooks }],
    status: 200,
  },
  putWebhookCursor: {
    call: () => [
      'PUT',
      `/webhooks/${hookId}/cursor`,
      { token: hooks, json: { after: '0000000000000000' } },
    ],
    status: 200,
  },
  getOpenApi: { call: () => ['GET', '/openapi.json', {}], status: 200 },
  getHealth: { call: () => ['GET', '/healthz', {}], status: 200 },
  getReadiness: { call: () => ['GET', '/readyz', {}], status: 200 },
  getMetrics: { call: () => ['GET', '/metrics', {}], status: 200 },
}

/** What a request with these headers gets from every route, whether its resource has an ETag or not. */
const CASES: readonly {
  headers: Record<string, string>
  expected: (route: Route) => [status: number, code: string | undefined]
}[] = [
  { headers: { 'if-match': STALE }, expected: () => [412, 'precondition_failed'] },
  {
    headers: { 'if-none-match': '*' },
    expected: (route) => (route.method === 'GET' ? [304, undefined] : [412, 'precondition_failed']),
  },
  { headers: { 'if-match': '' }, expected: () => [400, 'bad_request'] },
  { headers: { 'if-none-match': '' }, expected: () => [400, 'bad_request'] },
]

/** Preconditions that hold on a resource without an ETag. */
const UNTAGGED_HOLDS: readonly Record<string, string>[] = [
  { 'if-match': '*' },
  { 'if-none-match': `${STALE}, W/"v1"` },
]

/** Everything the failed requests might have changed, read back. */
async function everything(s: Awaited<ReturnType<typeof startService>>): Promise<string[]> {
  const reads = [
    s.call('GET', '/users?limit=100'),
    s.call('GET', '/webhooks', { token: hooks }),
    s.call('GET', `/webhooks/${hookId}`, { token: hooks }),
    s.call('GET', `/webhooks/${hookId}/cursor`, { token: hooks }),
    s.call('GET', '/events?limit=1000', { token: reader }),
  ]
  return (await Promise.all(reads)).map((res) => res.text)
}

describe('the route table: every route evaluates If-Match and If-None-Match (RFC 9110 §13.2.1)', () => {
  it('has a request for every route', () => {
    assert.deepEqual(ROUTES.map((route) => route.operationId).sort(), Object.keys(CALLS).sort())
  })

  it('answers a failed precondition 412 (or 304 on a read) on every route, changing nothing; a resource without an ETag holds only *', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    // :suspend needs an active user to answer 200; the preconditions come before that rule.
    const activated = await s.call('POST', `/users/${user.id}:activate`)
    assert.equal(activated.status, 200, activated.text)
    const active = await s.getUser(user.id)
    const hook = await s.call('POST', '/webhooks', {
      token: hooks,
      json: { url: 'https://hooks.example.com' },
    })
    assert.equal(hook.status, 201, hook.text)
    hookId = hook.json<{ id: string }>().id
    const before = await everything(s)
    const tagged: string[] = []
    for (const route of ROUTES) {
      const entry = CALLS[route.operationId]
      assert.ok(entry !== undefined, route.operationId)
      if (route.tagged) tagged.push(route.operationId)
      for (const { headers, expected } of CASES) {
        const [method, target, options] = entry.call(user.id)
        const label = `${route.operationId} with ${JSON.stringify(headers)}`
        const res = await s.call(method, target, { ...options, headers })
        const [status, code] = expected(route)
        if (code !== undefined) {
          assertProblem(res, status, code)
          continue
        }
        assert.equal(res.status, status, `${label}: ${res.text}`)
        assert.equal(res.text, '', label)
        assert.equal(res.headers.get('etag') !== null, route.tagged, label)
      }
    }
    assert.deepEqual(await s.getUser(user.id), active)
    assert.deepEqual(await everything(s), before)
    // Preconditions that hold on a resource without an ETag: each untagged route answers as it
    // would without them. Raw fetch: an NDJSON answer (export, import) is not one JSON text.
    for (const route of ROUTES.filter((candidate) => !candidate.tagged)) {
      const entry = CALLS[route.operationId]
      assert.ok(entry !== undefined, route.operationId)
      for (const headers of UNTAGGED_HOLDS) {
        const [method, target, options] = entry.call(user.id)
        const res = await fetch(`${s.baseUrl}${target}`, {
          method,
          headers: {
            authorization: `Bearer ${options.token ?? s.token}`,
            ...(options.json === undefined ? {} : { 'content-type': 'application/json' }),
            ...(options.contentType === undefined ? {} : { 'content-type': options.contentType }),
            ...headers,
          },
          ...(options.json === undefined ? {} : { body: JSON.stringify(options.json) }),
          ...(options.body === undefined ? {} : { body: options.body }),
        })
        const text = await res.text()
        const label = `${route.operationId} with ${JSON.stringify(headers)}`
        assert.equal(res.status, entry.status, `${label}: ${text}`)
      }
    }
    // The declaration is not vacuous: every route that takes a user or endpoint id and answers
    // with it, and only those, has an ETag.
    assert.deepEqual(tagged, [
      'getUser',
      'replaceUser',
      'updateUser',
      'deleteUser',
      'activateUser',
      'suspendUser',
      'revokeTokens',
      'getWebhook',
      'updateWebhook',
      'deleteWebhook',
      'rotateWebhookSecret',
    ])
  })
})

function sourceFiles(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const relative = `${prefix}${entry.name}`
    if (entry.isDirectory()) return sourceFiles(path.join(dir, entry.name), `${relative}/`)
    return entry.name.endsWith('.ts') ? [relative] : []
  })
}

describe('the precondition headers are read in one place', () => {
  const files = sourceFiles(SRC)

  it('names if-match and if-none-match (as Node keys request headers) only in http/conditional-request.ts', () => {
    assert.ok(files.length > 50, `only ${files.length} modules found under ${SRC}`)
    const readers = files.filter((file) =>
      /if-(none-)?match/.test(readFileSync(path.join(SRC, file), 'utf8')),
    )
    assert.deepEqual(readers, ['http/conditional-request.ts'])
  })

  it('reads them only in the listener', () => {
    const callers = files.filter((file) =>
      /\breadPreconditions\(/.test(readFileSync(path.join(SRC, file), 'utf8')),
    )
    assert.deepEqual(callers.sort(), ['app.ts', 'http/conditional-request.ts'])
  })
})
