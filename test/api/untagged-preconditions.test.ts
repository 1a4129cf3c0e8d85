import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { assertProblem, type TestResponse } from '../helpers/http.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { assertUnchangedBy } from '../helpers/users-suite.js'

/*
 * If-Match and If-None-Match on the resources that have no ETag: lists, the feed, the export, a
 * collection one creates in, a webhook's cursor. Such a resource exists, so `*` matches it and no
 * tag does (RFC 9110 §13.1.1, §13.1.2), and the preconditions are evaluated after the route's own
 * checks and before it acts or streams (RFC 9110 §13.2.1).
 */

const STALE = '"v1"'
const UNKNOWN_ID = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'
const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })
const hooks = makeToken({ sub: 'hooks-admin', scope: 'webhooks:admin' })
const stream = { accept: 'text/event-stream' }

async function createHook(s: TestService): Promise<string> {
  const res = await s.call('POST', '/webhooks', {
    token: hooks,
    json: { url: 'https://hooks.example.com' },
  })
  assert.equal(res.status, 201, res.text)
  return res.json<{ id: string }>().id
}

/**
 * GET /events as a stream, given up after 10 s: a stream that opened where it should not have
 * fails the test instead of holding it forever.
 */
async function requestStream(
  s: TestService,
  query: string,
  headers: Record<string, string>,
): Promise<TestResponse> {
  const res = await fetch(`${s.baseUrl}/events${query}`, {
    headers: { authorization: `Bearer ${reader}`, ...stream, ...headers },
    signal: AbortSignal.timeout(10_000),
  })
  const text = await res.text()
  return {
    status: res.status,
    headers: res.headers,
    text,
    body: undefined,
    json: <T>() => JSON.parse(text) as T,
  }
}

async function openStreams(s: TestService): Promise<string> {
  const metrics = await s.call('GET', `${s.url}/metrics`)
  return /^user_service_event_streams (\d+)$/m.exec(metrics.text)?.[1] ?? 'missing'
}

describe('preconditions on a list', () => {
  it('answers If-None-Match: * 304 with the cache headers, no ETag and no body; a tag list 200', async (t) => {
    const s = await startService(t)
    await s.createUser()
    for (const method of ['GET', 'HEAD']) {
      const res = await s.call(method, '/users', { headers: { 'if-none-match': '*' } })
      assert.equal(res.status, 304, `${method}: ${res.text}`)
      assert.equal(res.text, '')
      assert.equal(res.headers.get('etag'), null)
      assert.equal(res.headers.get('cache-control'), 'private, no-cache')
      assert.equal(res.headers.get('vary'), 'Authorization')
      assert.match(res.headers.get('x-request-id') ?? '', /.+/)
    }
    const listed = await s.call('GET', '/users', { headers: { 'if-none-match': `${STALE}, "v2"` } })
    assert.equal(listed.status, 200, listed.text)
    assert.equal(listed.json<{ items: unknown[] }>().items.length, 1)
  })

  it('answers a tag in If-Match 412 precondition_failed, and lets If-Match: * through', async (t) => {
    const s = await startService(t)
    await s.createUser()
    const failed = await s.call('GET', '/users', { headers: { 'if-match': STALE } })
    const problem = assertProblem(failed, 412, 'precondition_failed')
    assert.match(problem.detail, /no ETag/)
    assert.equal(failed.headers.get('cache-control'), 'no-store')
    const listed = await s.call('GET', '/users', { headers: { 'if-match': '*' } })
    assert.equal(listed.status, 200, listed.text)
  })

  it('puts a malformed query (400) before the precondition (412)', async (t) => {
    const s = await startService(t)
    const res = await s.call('GET', '/users?limit=0', { headers: { 'if-match': STALE } })
    assertProblem(res, 400, 'bad_request')
  })
})

describe('preconditions on POST /users', () => {
  it('answers a tag in If-Match, or If-None-Match: *, 412 before the body is validated, and creates nothing', async (t) => {
    const s = await startService(t)
    await s.createUser()
    await assertUnchangedBy(s, async () => {
      for (const headers of [{ 'if-match': STALE }, { 'if-none-match': '*' }]) {
        const valid = await s.call('POST', '/users', {
          json: { email: uniqueEmail(), name: 'New' },
          headers,
        })
        assertProblem(valid, 412, 'precondition_failed')
        // 412 comes before 422 in the fault order; a JSON syntax error (400) before both.
        const invalid = await s.call('POST', '/users', { json: { email: 'nope' }, headers })
        assertProblem(invalid, 412, 'precondition_failed')
        const broken = await s.call('POST', '/users', {
          body: '{',
          contentType: 'application/json',
          headers,
        })
        assertProblem(broken, 400, 'bad_request')
      }
    })
    const created = await s.call('POST', '/users', {
      json: { email: uniqueEmail(), name: 'New' },
      headers: { 'if-match': '*', 'if-none-match': STALE },
    })
    assert.equal(created.status, 201, created.text)
  })

  it('keeps nothing for a keyed request answered 412: the key stays free, and its replay checks nothing again', async (t) => {
    const s = await startService(t)
    const key = '"precondition-key"'
    const json = { email: uniqueEmail(), name: 'Keyed' }
    const refused = await s.call('POST', '/users', {
      json,
      headers: { 'idempotency-key': key, 'if-match': STALE },
    })
    assertProblem(refused, 412, 'precondition_failed')
    assert.equal((await s.snapshot()).length, 0)
    const created = await s.call('POST', '/users', { json, headers: { 'idempotency-key': key } })
    assert.equal(created.status, 201, created.text)
    const replayed = await s.call('POST', '/users', {
      json,
      headers: { 'idempotency-key': key, 'if-match': STALE },
    })
    assert.equal(replayed.status, 201, replayed.text)
    assert.equal(replayed.headers.get('idempotent-replayed'), 'true')
    assert.equal(replayed.text, created.text)
    assert.equal((await s.snapshot()).length, 1)
  })
})

describe('preconditions on the export and the import', () => {
  it('answers the export 412 or 304 before it streams anything', async (t) => {
    const s = await startService(t)
    await s.createUser()
    const failed = await s.call('GET', '/users:export', { headers: { 'if-match': STALE } })
    assertProblem(failed, 412, 'precondition_failed')
    for (const method of ['GET', 'HEAD']) {
      const res = await fetch(`${s.baseUrl}/users:export`, {
        method,
        headers: { authorization: `Bearer ${s.token}`, 'if-none-match': '*' },
      })
      assert.equal(res.status, 304, method)
      assert.equal(await res.text(), '')
      assert.equal(res.headers.get('content-type'), null)
    }
    const exported = await fetch(`${s.baseUrl}/users:export`, {
      headers: { authorization: `Bearer ${s.token}`, 'if-match': '*' },
    })
    assert.equal(exported.status, 200)
    assert.equal((await exported.text()).trim().split('\n').length, 1)
  })

  it('answers the import 412 after its query check and imports nothing', async (t) => {
    const s = await startService(t)
    const body = `${JSON.stringify({ email: uniqueEmail(), name: 'Imported' })}\n`
    await assertUnchangedBy(s, async () => {
      for (const headers of [{ 'if-match': STALE }, { 'if-none-match': '*' }]) {
        const res = await s.call('POST', '/users:import', {
          body,
          contentType: 'application/x-ndjson',
          headers,
        })
        assertProblem(res, 412, 'precondition_failed')
      }
      const query = await s.call('POST', '/users:import?dryRun=1', {
        body,
        contentType: 'application/x-ndjson',
        headers: { 'if-match': STALE },
      })
      assertProblem(query, 400, 'bad_request')
    })
  })
})

describe('preconditions on the change feed', () => {
  it('answers a stream 412 or 304 before it opens, holding no stream', async (t) => {
    const s = await startService(t)
    await s.createUser()
    const failed = await requestStream(s, '', { 'if-match': STALE })
    assertProblem(failed, 412, 'precondition_failed')
    const notModified = await requestStream(s, '', { 'if-none-match': '*' })
    assert.equal(notModified.status, 304, notModified.text)
    assert.equal(notModified.text, '')
    assert.equal(notModified.headers.get('content-type'), null)
    assert.equal(await openStreams(s), '0')
    // A malformed query is a 400 first, on a stream as on a page.
    const query = await requestStream(s, '?limit=x', { 'if-match': STALE })
    assertProblem(query, 400, 'bad_request')
  })

  it('opens the stream when If-Match is *', async (t) => {
    const s = await startService(t)
    await s.createUser()
    const aborted = new AbortController()
    t.after(() => aborted.abort())
    const res = await fetch(`${s.baseUrl}/events`, {
      headers: { authorization: `Bearer ${reader}`, ...stream, 'if-match': '*' },
      signal: AbortSignal.any([aborted.signal, AbortSignal.timeout(10_000)]),
    })
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/)
    const reading = res.body?.getReader()
    assert.ok(reading !== undefined)
    // Frames may come in several chunks: read until the backlog's event is in, or the stream ends.
    const decoder = new TextDecoder()
    let received = ''
    while (!received.includes('event: user.created')) {
      const chunk = await reading.read()
      if (chunk.done) break
      received += decoder.decode(chunk.value, { stream: true })
    }
    assert.match(received, /event: user\.created/)
    aborted.abort()
  })

  it('answers a page If-None-Match: * 304 and a tag in If-Match 412', async (t) => {
    const s = await startService(t)
    const notModified = await s.call('GET', '/events', {
      token: reader,
      headers: { 'if-none-match': '*' },
    })
    assert.equal(notModified.status, 304, notModified.text)
    const failed = await s.call('GET', '/events', { token: reader, headers: { 'if-match': STALE } })
    assertProblem(failed, 412, 'precondition_failed')
  })
})

describe("preconditions on a webhook endpoint's cursor", () => {
  it('answers an unknown endpoint 404 whatever the preconditions', async (t) => {
    const s = await startService(t)
    for (const headers of [{ 'if-match': '*' }, { 'if-match': STALE }, { 'if-none-match': '*' }]) {
      const put = await s.call('PUT', `/webhooks/${UNKNOWN_ID}/cursor`, {
        token: hooks,
        json: { after: '0000000000000000' },
        headers,
      })
      assertProblem(put, 404, 'not_found')
      const get = await s.call('GET', `/webhooks/${UNKNOWN_ID}/cursor`, { token: hooks, headers })
      assertProblem(get, 404, 'not_found')
    }
  })

  it('answers a failed precondition 412 before the body is validated, leaving the cursor where it was', async (t) => {
    const s = await startService(t)
    await s.createUser()
    const id = await createHook(s)
    const cursor = `/webhooks/${id}/cursor`
    const before = (await s.call('GET', cursor, { token: hooks })).text
    for (const headers of [{ 'if-match': STALE }, { 'if-none-match': '*' }]) {
      for (const json of [{ after: '0000000000000000' }, { after: 'not an event id' }]) {
        const res = await s.call('PUT', cursor, { token: hooks, json, headers })
        assertProblem(res, 412, 'precondition_failed')
      }
    }
    assert.equal((await s.call('GET', cursor, { token: hooks })).text, before)
    const invalid = await s.call('PUT', cursor, {
      token: hooks,
      json: { after: 'not an event id' },
      headers: { 'if-match': '*' },
    })
    assertProblem(invalid, 422)
    const moved = await s.call('PUT', cursor, {
      token: hooks,
      json: { after: '0000000000000000' },
      headers: { 'if-match': '*' },
    })
    assert.equal(moved.status, 200, moved.text)
    assert.deepEqual(moved.json(), { after: '0000000000000000' })
    const read = await s.call('GET', cursor, { token: hooks, headers: { 'if-none-match': '*' } })
    assert.equal(read.status, 304, read.text)
  })

  it('answers POST /webhooks 412 and registers nothing', async (t) => {
    const s = await startService(t)
    for (const headers of [{ 'if-match': STALE }, { 'if-none-match': '*' }]) {
      const res = await s.call('POST', '/webhooks', {
        token: hooks,
        json: { url: 'https://hooks.example.com' },
        headers,
      })
      assertProblem(res, 412, 'precondition_failed')
    }
    const list = await s.call('GET', '/webhooks', { token: hooks })
    assert.deepEqual(list.json<{ items: unknown[] }>().items, [])
  })
})

describe('preconditions on the service routes', () => {
  it('answers the probes, the metrics and the OpenAPI document like any other resource without an ETag', async (t) => {
    const s = await startService(t)
    for (const target of ['/healthz', '/readyz', '/metrics', '/openapi.json']) {
      const url = `${s.url}${target}`
      const served = await fetch(url, { headers: { 'if-match': '*' } })
      assert.equal(served.status, 200, target)
      const notModified = await fetch(url, { headers: { 'if-none-match': '*' } })
      assert.equal(notModified.status, 304, target)
      assert.equal(await notModified.text(), '', target)
      assert.equal(notModified.headers.get('etag'), null, target)
      assert.equal(
        notModified.headers.get('cache-control'),
        served.headers.get('cache-control'),
        target,
      )
      const failed = await s.call('GET', url, { headers: { 'if-match': STALE } })
      assertProblem(failed, 412, 'precondition_failed')
    }
  })
})
