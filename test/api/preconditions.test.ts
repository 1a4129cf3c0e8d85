import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { assertProblem, type TestResponse } from '../helpers/http.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { assertUnchangedBy } from '../helpers/users-suite.js'

const UNKNOWN_ID = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'
const STALE = '"never-this-tag"'

/** An active user (so that :suspend and :activate both have something to change) and its ETag. */
async function startWithActiveUser(
  t: Parameters<typeof startService>[0],
): Promise<[TestService, User, string]> {
  const s = await startService(t)
  const created = await s.createUser({ name: 'Ada Lovelace', metadata: { team: 'analytics' } })
  const activated = await s.call('POST', `/users/${created.id}:activate`)
  assert.equal(activated.status, 200, activated.text)
  const etag = activated.headers.get('etag')
  assert.ok(etag !== null)
  return [s, activated.json<User>(), etag]
}

/** Every write on one user, with a body where it takes one. */
function writesOn(user: User): Array<[string, string, unknown]> {
  return [
    ['PUT', `/users/${user.id}`, { email: uniqueEmail(), name: 'Replaced' }],
    ['PATCH', `/users/${user.id}`, { name: 'Patched' }],
    ['DELETE', `/users/${user.id}`, undefined],
    ['POST', `/users/${user.id}:suspend`, undefined],
    ['POST', `/users/${user.id}:activate`, undefined],
  ]
}

function callWith(
  s: TestService,
  [method, target, json]: [string, string, unknown],
  headers: Record<string, string>,
): Promise<TestResponse> {
  return s.call(method, target, { headers, ...(json === undefined ? {} : { json }) })
}

describe('If-None-Match on writes (RFC 9110 §13.1.2)', () => {
  it('answers 412 precondition_failed for If-None-Match: * on PUT of an existing user, and changes nothing', async (t) => {
    const [s, user] = await startWithActiveUser(t)
    const res = await assertUnchangedBy(s, () =>
      s.call('PUT', `/users/${user.id}`, {
        json: { email: uniqueEmail(), name: 'Replaced' },
        headers: { 'if-none-match': '*' },
      }),
    )
    assertProblem(res, 412, 'precondition_failed')
    assert.equal(res.headers.get('cache-control'), 'no-store')
    assert.deepEqual(await s.getUser(user.id), user)
  })

  it('answers 412 for If-None-Match: * or the current tag on every write, and changes nothing', async (t) => {
    const [s, user, etag] = await startWithActiveUser(t)
    await assertUnchangedBy(s, async () => {
      for (const write of writesOn(user)) {
        for (const value of ['*', etag, `"other", ${etag}`, `W/${etag}`]) {
          const res = await callWith(s, write, { 'if-none-match': value })
          assertProblem(res, 412, 'precondition_failed')
        }
      }
    })
  })

  it('lets a write through when If-None-Match names only other tags', async (t) => {
    const [s, user] = await startWithActiveUser(t)
    const res = await s.call('PATCH', `/users/${user.id}`, {
      json: { name: 'Changed' },
      headers: { 'if-none-match': STALE },
    })
    assert.equal(res.status, 200, res.text)
    assert.equal((await s.getUser(user.id)).name, 'Changed')
  })
})

describe('If-Match on GET and HEAD (RFC 9110 §13.1.1)', () => {
  it('answers 412 precondition_failed to GET and HEAD with a tag that does not match', async (t) => {
    const [s, user, etag] = await startWithActiveUser(t)
    for (const value of [STALE, `W/${etag}`, `"a", "b"`]) {
      const got = await s.call('GET', `/users/${user.id}`, { headers: { 'if-match': value } })
      assertProblem(got, 412, 'precondition_failed')
      assert.equal(got.headers.get('cache-control'), 'no-store')
      const head = await s.call('HEAD', `/users/${user.id}`, { headers: { 'if-match': value } })
      assert.equal(head.status, 412, `HEAD with If-Match ${value}`)
      assert.equal(head.text, '')
      assert.match(head.headers.get('content-type') ?? '', /^application\/problem\+json/)
    }
  })

  it('serves GET and HEAD when If-Match holds the current tag or *', async (t) => {
    const [s, user, etag] = await startWithActiveUser(t)
    for (const value of [etag, '*', `${STALE}, ${etag}`]) {
      const got = await s.call('GET', `/users/${user.id}`, { headers: { 'if-match': value } })
      assert.equal(got.status, 200, got.text)
      assert.deepEqual(got.json<User>(), user)
      assert.equal(
        (await s.call('HEAD', `/users/${user.id}`, { headers: { 'if-match': value } })).status,
        200,
      )
    }
  })

  it('checks If-Match before If-None-Match: a failing If-Match is 412, not 304', async (t) => {
    const [s, user, etag] = await startWithActiveUser(t)
    const both = { 'if-match': STALE, 'if-none-match': etag }
    assertProblem(
      await s.call('GET', `/users/${user.id}`, { headers: both }),
      412,
      'precondition_failed',
    )
    assert.equal((await s.call('HEAD', `/users/${user.id}`, { headers: both })).status, 412)
    const revalidated = await s.call('GET', `/users/${user.id}`, {
      headers: { 'if-match': etag, 'if-none-match': etag },
    })
    assert.equal(revalidated.status, 304)
  })
})

describe('dates as preconditions (docs/api.md: the service has no Last-Modified)', () => {
  it('sends no Last-Modified, and ignores If-Modified-Since, If-Unmodified-Since and If-Range', async (t) => {
    const [s, user, etag] = await startWithActiveUser(t)
    const future = new Date(Date.now() + 86_400_000).toUTCString()
    const past = new Date(Date.UTC(2000, 0, 1)).toUTCString()
    const got = await s.call('GET', `/users/${user.id}`, {
      headers: { 'if-modified-since': future, 'if-range': past },
    })
    assert.equal(got.status, 200, got.text)
    assert.deepEqual(got.json<User>(), user)
    assert.equal(got.headers.get('last-modified'), null)
    assert.equal(got.headers.get('etag'), etag)
    // The ETag still decides where it is sent with a date.
    const both = await s.call('GET', `/users/${user.id}`, {
      headers: { 'if-modified-since': past, 'if-none-match': etag },
    })
    assert.equal(both.status, 304)
    for (const write of writesOn(user).slice(0, 2)) {
      const res = await callWith(s, write, { 'if-unmodified-since': past })
      assert.equal(res.status, 200, res.text)
    }
  })
})

describe('If-Match: * on an unknown id', () => {
  it('answers 404 not_found, not 412, on GET, HEAD, PUT and the custom methods', async (t) => {
    const s = await startService(t)
    const headers = { 'if-match': '*' }
    assertProblem(await s.call('GET', `/users/${UNKNOWN_ID}`, { headers }), 404, 'not_found')
    assert.equal((await s.call('HEAD', `/users/${UNKNOWN_ID}`, { headers })).status, 404)
    const put = await s.call('PUT', `/users/${UNKNOWN_ID}`, {
      headers,
      json: { email: uniqueEmail(), name: 'Nobody' },
    })
    assertProblem(put, 404, 'not_found')
    for (const verb of ['activate', 'suspend']) {
      assertProblem(
        await s.call('POST', `/users/${UNKNOWN_ID}:${verb}`, { headers }),
        404,
        'not_found',
      )
    }
    assert.deepEqual(await s.snapshot(), [])
  })
})

describe('415 on PATCH', () => {
  const ACCEPT_PATCH = 'application/merge-patch+json, application/json'

  it('carries Accept-Patch naming merge-patch then JSON, and changes nothing', async (t) => {
    const [s, user] = await startWithActiveUser(t)
    const bodies: Array<[string, string]> = [
      ['text/plain', '{"name":"X"}'],
      ['application/json-patch+json', '[{"op":"replace","path":"/name","value":"X"}]'],
      ['application/merge-patch+json; charset=latin1', '{"name":"X"}'],
      ['application/x-www-form-urlencoded', 'name=X'],
    ]
    await assertUnchangedBy(s, async () => {
      for (const [contentType, body] of bodies) {
        const res = await s.call('PATCH', `/users/${user.id}`, { contentType, body })
        assertProblem(res, 415, 'unsupported_media_type')
        assert.equal(res.headers.get('accept-patch'), ACCEPT_PATCH, contentType)
      }
      // fetch sends a string body as text/plain when no type is given: take the type away by hand.
      const untyped = await s.call('PATCH', `/users/${user.id}`, {
        body: new Uint8Array(Buffer.from('{"name":"X"}')),
      })
      assertProblem(untyped, 415, 'unsupported_media_type')
      assert.equal(untyped.headers.get('accept-patch'), ACCEPT_PATCH)
    })
  })

  it('is not sent with a 415 on PUT or POST', async (t) => {
    const [s, user] = await startWithActiveUser(t)
    const put = await s.call('PUT', `/users/${user.id}`, { contentType: 'text/plain', body: '{}' })
    assertProblem(put, 415, 'unsupported_media_type')
    assert.equal(put.headers.get('accept-patch'), null)
    const post = await s.call('POST', '/users', { contentType: 'text/plain', body: '{}' })
    assertProblem(post, 415, 'unsupported_media_type')
    assert.equal(post.headers.get('accept-patch'), null)
  })
})
