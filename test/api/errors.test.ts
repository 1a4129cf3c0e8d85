import assert from 'node:assert/strict'
import { rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { createJsonLogger } from '../../src/log/logger.js'
import { sleep } from '../helpers/child.js'
import { FaultyStore } from '../helpers/faulty-store.js'
import { assertProblem, type Problem, request, type TestResponse } from '../helpers/http.js'
import { makeTempDir, startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { type SocketResponse, sendOverSocket } from '../helpers/socket-http.js'
import { makeToken, TEST_SECRET } from '../helpers/tokens.js'

const UNKNOWN_ID = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'
const KIB_64 = 64 * 1024
const SANE_ID = /^[A-Za-z0-9._-]{1,128}$/
const PROBLEM_MEMBERS = ['code', 'detail', 'requestId', 'status', 'title', 'type']
const SECRET_MESSAGE = 'disk on fire at /secret/path'

/** A stack frame, a source file or Node internals: nothing a client should ever see. */
const LEAK = /\bat .*[\\/]|\.[cm]?[jt]s:\d+|node:internal|[\\/]src[\\/]|Error:/

/**
 * An error answer as §5 wants it: problem+json with exactly the six members (and errors for a
 * 422), requestId equal to X-Request-Id, no-store, and nothing internal in the body.
 */
function assertError(res: TestResponse, status: number, code: string): Problem {
  const problem = assertProblem(res, status, code)
  const members = Object.keys(problem)
    .filter((key) => !(status === 422 && key === 'errors'))
    .sort()
  assert.deepEqual(members, PROBLEM_MEMBERS, res.text)
  assert.ok(problem.type !== '' && problem.title !== '' && problem.detail !== '', res.text)
  assert.match(problem.code, /^[a-z]+(_[a-z]+)*$/)
  assert.equal(res.headers.get('cache-control'), 'no-store', `${status} ${code}`)
  assert.doesNotMatch(res.text, LEAK)
  return problem
}

/** A JSON text of exactly `size` bytes (padded with white space) for POST /users. */
function createBodyOfSize(size: number): string {
  const text = JSON.stringify({ email: uniqueEmail('big'), name: 'Big Body' })
  assert.ok(size >= text.length)
  return `${text.slice(0, -1)}${' '.repeat(size - text.length)}}`
}

function chunked(text: string, chunkSize = 16 * 1024): string {
  let out = ''
  for (let i = 0; i < text.length; i += chunkSize) {
    const chunk = text.slice(i, i + chunkSize)
    out += `${Buffer.byteLength(chunk).toString(16)}\r\n${chunk}\r\n`
  }
  return `${out}0\r\n\r\n`
}

function codeOf(res: SocketResponse): unknown {
  const body = res.body
  return typeof body === 'object' && body !== null && 'code' in body ? body.code : undefined
}

/** A service whose maintenance file exists from now on, once the service has noticed it. */
async function enterMaintenance(t: TestContext, s: TestService, file: string): Promise<void> {
  await writeFile(file, '')
  t.after(() => rm(file, { force: true }))
  await waitForStatus(`${s.url}/readyz`, 503)
}

async function waitForStatus(url: string, status: number): Promise<void> {
  const deadline = Date.now() + 5000
  while ((await request('GET', url)).status !== status) {
    if (Date.now() > deadline) assert.fail(`${url} did not turn ${status}`)
    await sleep(25)
  }
}

describe('error answers', () => {
  it('answers 400 bad_request for bad JSON, a bad query and a bad path escape', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const before = await s.snapshot()
    assertError(
      await s.call('POST', '/users', { body: '{', contentType: 'application/json' }),
      400,
      'bad_request',
    )
    assertError(
      await s.call('PATCH', `/users/${user.id}`, {
        body: '{"name": "x",}',
        contentType: 'application/json',
      }),
      400,
      'bad_request',
    )
    assertError(await s.call('GET', '/users?limit=0'), 400, 'bad_request')
    assertError(await s.call('GET', '/users/%ZZ'), 400, 'bad_request')
    assert.deepEqual(await s.snapshot(), before)
  })

  it('answers 400 bad_request for a body that names a member twice in one object, and changes nothing', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const before = await s.snapshot()
    const json = 'application/json'
    const created = await s.call('POST', '/users', {
      body: `{"email":"${uniqueEmail()}","name":"Twice","email":"${uniqueEmail()}"}`,
      contentType: json,
    })
    assertError(created, 400, 'bad_request')
    assert.match(created.json<Problem>().detail, /"email" twice in one object/)
    const patched = await s.call('PATCH', `/users/${user.id}`, {
      body: '{"metadata":{"tier":"gold","\\u0074ier":"free"}}',
      contentType: 'application/merge-patch+json',
    })
    assertError(patched, 400, 'bad_request')
    assert.match(patched.json<Problem>().detail, /"tier" twice/)
    assertError(
      await s.call('PUT', `/users/${user.id}`, {
        body: `{"email":"${user.email}","name":"A","name":"B"}`,
        contentType: json,
      }),
      400,
      'bad_request',
    )
    assert.deepEqual(await s.snapshot(), before)
    // One name in two objects is no repeat.
    const nested = await s.call('POST', '/users', {
      body: `{"email":"${uniqueEmail()}","name":"Once","metadata":{"name":"inner","email":"x"}}`,
      contentType: json,
    })
    assert.equal(nested.status, 201, nested.text)
  })

  it('answers 401 token_missing, token_invalid and token_expired', async (t) => {
    const s = await startService(t)
    assertError(await s.call('GET', '/users', { token: undefined }), 401, 'token_missing')
    assertError(
      await s.call('GET', '/users', {
        token: makeToken({ secret: 'another-secret-0123456789-abcdefghijkl' }),
      }),
      401,
      'token_invalid',
    )
    assertError(
      await s.call('GET', '/users', { token: makeToken({ ttl: -3600 }) }),
      401,
      'token_expired',
    )
  })

  it('answers 403 insufficient_scope and subject_suspended', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    assert.equal((await s.call('POST', `/users/${user.id}:activate`)).status, 200)
    assert.equal((await s.call('POST', `/users/${user.id}:suspend`)).status, 200)
    const before = await s.snapshot()
    assertError(
      await s.call('POST', '/users', {
        token: makeToken({ scope: 'users:read' }),
        json: { email: uniqueEmail(), name: 'X' },
      }),
      403,
      'insufficient_scope',
    )
    assertError(
      await s.call('GET', '/users', { token: makeToken({ sub: user.id }) }),
      403,
      'subject_suspended',
    )
    assert.deepEqual(await s.snapshot(), before)
  })

  it('answers 404 not_found for an unknown user and an unknown path', async (t) => {
    const s = await startService(t)
    assertError(await s.call('GET', `/users/${UNKNOWN_ID}`), 404, 'not_found')
    assertError(await s.call('DELETE', `/users/${UNKNOWN_ID}`), 404, 'not_found')
    assertProblem(await s.call('GET', '/nowhere'), 404, 'not_found')
  })

  it('answers 405 method_not_allowed', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const res = await s.call('DELETE', '/users')
    assertError(res, 405, 'method_not_allowed')
    assert.ok((res.headers.get('allow') ?? '') !== '')
    assert.deepEqual(await s.snapshot(), [user])
  })

  it('answers 409 duplicate_email and invalid_transition', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const before = await s.snapshot()
    assertError(
      await s.call('POST', '/users', { json: { email: user.email.toUpperCase(), name: 'Dup' } }),
      409,
      'duplicate_email',
    )
    assertError(await s.call('POST', `/users/${user.id}:suspend`), 409, 'invalid_transition')
    assert.deepEqual(await s.snapshot(), before)
  })

  it('answers 412 precondition_failed', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    assertError(
      await s.call('PATCH', `/users/${user.id}`, {
        json: { name: 'X' },
        headers: { 'if-match': '"stale"' },
      }),
      412,
      'precondition_failed',
    )
    assert.deepEqual(await s.getUser(user.id), user)
  })

  it('answers 422 validation_failed with field errors', async (t) => {
    const s = await startService(t)
    const problem = assertError(
      await s.call('POST', '/users', { json: { email: 'nope', name: '' } }),
      422,
      'validation_failed',
    )
    assert.ok((problem.errors ?? []).length >= 2)
    assert.deepEqual(await s.snapshot(), [])
  })
})

describe('500 internal', () => {
  it('hides a failed create behind a bare 500 and logs the message under the same requestId', async (t) => {
    const store = new FaultyStore()
    const s = await startService(t, { store })
    store.fail('create', { error: new Error(SECRET_MESSAGE) })
    const res = await s.call('POST', '/users', { json: { email: uniqueEmail(), name: 'Doomed' } })
    const problem = assertError(res, 500, 'internal')
    assert.ok(!res.text.includes('disk on fire'), res.text)
    assert.ok(!res.text.includes('/secret/path'), res.text)
    assert.ok(!res.text.includes('stack'), res.text)
    const errorLine = s.logs.find(
      (line) => line['level'] === 'error' && line['requestId'] === problem.requestId,
    )
    assert.ok(
      errorLine !== undefined,
      `no error log line for ${problem.requestId}: ${JSON.stringify(s.logs)}`,
    )
    assert.match(JSON.stringify(errorLine), /disk on fire at \/secret\/path/)
    const requestLine = s.logs.find(
      (line) => line['msg'] === 'request' && line['requestId'] === problem.requestId,
    )
    assert.equal(requestLine?.['status'], 500)
    assert.deepEqual(await s.snapshot(), [])
  })

  it('hides a failed update, and leaves the user as it was', async (t) => {
    const store = new FaultyStore()
    const s = await startService(t, { store })
    const user = await s.createUser()
    store.fail('update', { error: new Error(SECRET_MESSAGE) })
    for (const [method, target, json] of [
      ['PATCH', `/users/${user.id}`, { name: 'Changed' }],
      ['PUT', `/users/${user.id}`, { email: uniqueEmail(), name: 'Changed' }],
      ['POST', `/users/${user.id}:activate`, undefined],
    ] as const) {
      const res = await s.call(method, target, json === undefined ? {} : { json })
      const problem = assertError(res, 500, 'internal')
      assert.ok(!res.text.includes('disk on fire'), res.text)
      const errorLine = s.logs.find(
        (line) => line['level'] === 'error' && line['requestId'] === problem.requestId,
      )
      assert.match(JSON.stringify(errorLine ?? {}), /disk on fire/)
    }
    assert.deepEqual(await s.getUser(user.id), user)
  })

  it('answers 500 when the store throws on a read, for GET and HEAD', async (t) => {
    const store = new FaultyStore()
    const s = await startService(t, { store })
    const user = await s.createUser()
    store.fail('get', { error: new Error(SECRET_MESSAGE), sync: true })
    const res = await s.call('GET', `/users/${user.id}`)
    const problem = assertError(res, 500, 'internal')
    assert.ok(!res.text.includes('disk on fire'))
    assert.ok(
      s.logs.some(
        (line) =>
          line['level'] === 'error' &&
          line['requestId'] === problem.requestId &&
          JSON.stringify(line).includes(SECRET_MESSAGE),
      ),
    )
    const head = await s.call('HEAD', `/users/${user.id}`)
    assert.equal(head.status, 500)
    assert.equal(head.text, '')
    store.heal('get')
    assert.deepEqual(await s.getUser(user.id), user)
  })

  it('answers 500 when listing or deleting fails', async (t) => {
    const store = new FaultyStore()
    const s = await startService(t, { store })
    const user = await s.createUser()
    store.fail('list', { error: new Error(SECRET_MESSAGE) })
    store.fail('delete', { error: new Error(SECRET_MESSAGE) })
    assertError(await s.call('GET', '/users'), 500, 'internal')
    assertError(await s.call('DELETE', `/users/${user.id}`), 500, 'internal')
    store.heal('list')
    assert.deepEqual(await s.snapshot(), [user])
  })

  it('keeps serving after a 500', async (t) => {
    const store = new FaultyStore()
    const s = await startService(t, { store })
    store.fail('create', { error: new Error(SECRET_MESSAGE) })
    assertError(
      await s.call('POST', '/users', { json: { email: uniqueEmail(), name: 'Doomed' } }),
      500,
      'internal',
    )
    store.heal('create')
    const user = await s.createUser()
    assert.deepEqual(await s.snapshot(), [user])
  })
})

describe('503 and the faults before and after it', () => {
  it('answers 503 maintenance with Retry-After after the route checks and before the token check', async (t) => {
    const file = path.join(await makeTempDir(t), 'maintenance')
    const s = await startService(t, { maintenanceFile: file })
    const user = await s.createUser()
    const before = await s.snapshot()
    await enterMaintenance(t, s, file)

    const refused = await s.call('POST', '/users', {
      json: { email: uniqueEmail(), name: 'During maintenance' },
    })
    assertError(refused, 503, 'maintenance')
    assert.match(refused.headers.get('retry-after') ?? '', /^\d+$/)
    assertError(await s.call('GET', `/users/${user.id}`), 503, 'maintenance')
    // 503 before 401: no token, or a bad one, is still a 503.
    assertError(await s.call('GET', '/users', { token: undefined }), 503, 'maintenance')
    assertError(
      await s.call('DELETE', `/users/${user.id}`, { token: 'not-a-token' }),
      503,
      'maintenance',
    )
    // Route faults before 503.
    assertProblem(await s.call('GET', '/nowhere'), 404, 'not_found')
    assertError(await s.call('DELETE', '/users'), 405, 'method_not_allowed')
    assertError(await s.call('POST', `/users/${user.id}:explode`), 404, 'not_found')
    assert.equal((await request('GET', `${s.url}/healthz`)).status, 200)

    await rm(file)
    await waitForStatus(`${s.url}/readyz`, 200)
    assert.deepEqual(await s.snapshot(), before)
  })
})

describe('415 unsupported_media_type', () => {
  const cases: [string, { contentType?: string }][] = [
    ['text/plain', { contentType: 'text/plain' }],
    ['application/x-www-form-urlencoded', { contentType: 'application/x-www-form-urlencoded' }],
    ['application/jsonx', { contentType: 'application/jsonx' }],
    ['application/merge-patch+json on POST', { contentType: 'application/merge-patch+json' }],
    ['charset=iso-8859-1', { contentType: 'application/json; charset=iso-8859-1' }],
    ['charset=utf-16', { contentType: 'application/json; charset="utf-16"' }],
    [
      'charset=latin1 after a quoted parameter',
      { contentType: 'application/json; p="a;b"; charset=latin1' },
    ],
    ['no Content-Type at all', {}],
  ]
  for (const [name, options] of cases) {
    it(`refuses a POST /users body with ${name}`, async (t) => {
      const s = await startService(t)
      const body = new TextEncoder().encode(JSON.stringify({ email: uniqueEmail(), name: 'Typed' }))
      const res = await s.call('POST', '/users', { body, ...options })
      assertError(res, 415, 'unsupported_media_type')
      assert.deepEqual(await s.snapshot(), [])
    })
  }

  const JSON_TYPE = 'application/json'

  it('refuses a body with a content coding, saying with Accept-Encoding that it takes none, and changes nothing', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const body = JSON.stringify({ email: uniqueEmail(), name: 'Coded' })
    // The body is plain JSON: a header that claims a coding is not ignored either.
    for (const coding of ['gzip', 'br', 'identity, gzip', 'x-custom']) {
      const headers = { 'content-encoding': coding }
      const created = await s.call('POST', '/users', { body, contentType: JSON_TYPE, headers })
      assertError(created, 415, 'unsupported_media_type')
      assert.equal(created.headers.get('accept-encoding'), 'identity', coding)
      assert.match(created.json<Problem>().detail, /Content-Encoding/)
      const patched = await s.call('PATCH', `/users/${user.id}`, {
        body: JSON.stringify({ name: 'Coded' }),
        contentType: 'application/merge-patch+json',
        headers,
      })
      assertError(patched, 415, 'unsupported_media_type')
      assert.equal(patched.headers.get('accept-encoding'), 'identity')
      assert.equal(
        patched.headers.get('accept-patch'),
        'application/merge-patch+json, application/json',
      )
    }
    assert.deepEqual(await s.snapshot(), [user])
    // identity is no coding at all, and a bodiless request's header codes nothing.
    const plain = await s.call('POST', '/users', {
      body,
      contentType: JSON_TYPE,
      headers: { 'content-encoding': 'Identity' },
    })
    assert.equal(plain.status, 201, plain.text)
    const activated = await s.call('POST', `/users/${user.id}:activate`, {
      headers: { 'content-encoding': 'gzip' },
    })
    assert.equal(activated.status, 200, activated.text)
  })

  it('refuses a custom method body that is not JSON, and a PUT with merge-patch', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    assertError(
      await s.call('POST', `/users/${user.id}:activate`, { body: 'go', contentType: 'text/plain' }),
      415,
      'unsupported_media_type',
    )
    assertError(
      await s.call('PUT', `/users/${user.id}`, {
        body: JSON.stringify({ email: user.email, name: 'Y' }),
        contentType: 'application/merge-patch+json',
      }),
      415,
      'unsupported_media_type',
    )
    assert.deepEqual(await s.getUser(user.id), user)
  })

  it('takes application/json with charset utf-8 in any spelling, and merge-patch on PATCH', async (t) => {
    const s = await startService(t)
    for (const contentType of [
      'application/json; charset=utf-8',
      'Application/JSON;charset="UTF-8"',
      // RFC 9110 §5.6.4: a quoted-string is one value, its ; and = included, \- a quoted-pair.
      'application/json; profile="urn:example;charset=latin1"',
      'application/json; charset="utf\\-8"',
    ]) {
      const res = await s.call('POST', '/users', {
        body: JSON.stringify({ email: uniqueEmail(), name: 'Typed' }),
        contentType,
      })
      assert.equal(res.status, 201, `${contentType}: ${res.text}`)
    }
    const user = await s.createUser()
    const res = await s.call('PATCH', `/users/${user.id}`, {
      body: '{"name":"Merged"}',
      contentType: 'application/merge-patch+json',
    })
    assert.equal(res.status, 200, res.text)
  })
})

describe('413 payload_too_large', () => {
  it('accepts a body of exactly 64 KiB', async (t) => {
    const s = await startService(t)
    const body = createBodyOfSize(KIB_64)
    assert.equal(Buffer.byteLength(body), KIB_64)
    const res = await s.call('POST', '/users', { body, contentType: 'application/json' })
    assert.equal(res.status, 201, res.text)
  })

  it('refuses a body of 64 KiB + 1 and creates nothing', async (t) => {
    const s = await startService(t)
    const body = createBodyOfSize(KIB_64 + 1)
    const res = await s.call('POST', '/users', { body, contentType: 'application/json' })
    assertError(res, 413, 'payload_too_large')
    assert.deepEqual(await s.snapshot(), [])
  })

  it('counts a chunked body without Content-Length: 64 KiB passes, 64 KiB + 1 is refused', async (t) => {
    const s = await startService(t)
    const send = (text: string): Promise<SocketResponse> =>
      sendOverSocket(s.url, {
        method: 'POST',
        target: '/users',
        headers: {
          authorization: `Bearer ${s.token}`,
          'content-type': 'application/json',
          'transfer-encoding': 'chunked',
        },
        body: chunked(text),
      })
    const ok = await send(createBodyOfSize(KIB_64))
    assert.equal(ok.status, 201, ok.text)
    const refused = await send(createBodyOfSize(KIB_64 + 1))
    assert.equal(refused.status, 413, refused.text)
    assert.equal(codeOf(refused), 'payload_too_large')
    assert.equal(refused.headers.get('content-type'), 'application/problem+json')
    assert.equal((await s.snapshot()).length, 1)
  })

  it('answers a huge announced Content-Length without waiting for the body', async (t) => {
    const s = await startService(t)
    const res = await sendOverSocket(s.url, {
      method: 'POST',
      target: '/users',
      headers: {
        authorization: `Bearer ${s.token}`,
        'content-type': 'application/json',
        'content-length': '10000000',
      },
      timeoutMs: 3000,
    })
    assert.equal(res.status, 413, res.text)
    assert.equal(codeOf(res), 'payload_too_large')
    assert.equal(res.headers.get('connection'), 'close')
    assert.deepEqual(await s.snapshot(), [])
  })

  it('refuses an oversized PATCH and leaves the user as it was', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const res = await s.call('PATCH', `/users/${user.id}`, {
      body: `{"name":"${'x'.repeat(KIB_64)}"}`,
      contentType: 'application/json',
    })
    assertError(res, 413, 'payload_too_large')
    assert.deepEqual(await s.getUser(user.id), user)
  })
})

describe('400 for bodies that are not JSON', () => {
  const bodies: [string, string | Uint8Array][] = [
    ['an unclosed object', '{'],
    ['a bare word', 'nope'],
    ['trailing bytes', '{"name":"x"}x'],
    ['a single quote string', "{'name':'x'}"],
    ['white space only', '   '],
    [
      'invalid UTF-8 bytes',
      Uint8Array.from([...Buffer.from('{"email":"a@b.co","name":"'), 0xff, ...Buffer.from('"}')]),
    ],
    [
      'an overlong UTF-8 sequence',
      Uint8Array.from([
        ...Buffer.from('{"email":"a@b.co","name":"'),
        0xc0,
        0xaf,
        ...Buffer.from('"}'),
      ]),
    ],
    [
      'a UTF-16 surrogate in UTF-8',
      Uint8Array.from([
        ...Buffer.from('{"email":"a@b.co","name":"'),
        0xed,
        0xa0,
        0x80,
        ...Buffer.from('"}'),
      ]),
    ],
  ]
  for (const [name, body] of bodies) {
    it(`answers 400 for ${name} and changes nothing`, async (t) => {
      const s = await startService(t)
      const user = await s.createUser()
      assertError(
        await s.call('POST', '/users', { body, contentType: 'application/json' }),
        400,
        'bad_request',
      )
      assertError(
        await s.call('PUT', `/users/${user.id}`, { body, contentType: 'application/json' }),
        400,
        'bad_request',
      )
      assertError(
        await s.call('PATCH', `/users/${user.id}`, {
          body,
          contentType: 'application/merge-patch+json',
        }),
        400,
        'bad_request',
      )
      assertError(
        await s.call('POST', `/users/${user.id}:activate`, {
          body,
          contentType: 'application/json',
        }),
        400,
        'bad_request',
      )
      assert.deepEqual(await s.snapshot(), [user])
    })
  }

  it('answers 400 for an empty body where one is required', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    assertError(
      await s.call('POST', '/users', { body: '', contentType: 'application/json' }),
      400,
      'bad_request',
    )
    assertError(
      await s.call('PUT', `/users/${user.id}`, { body: '', contentType: 'application/json' }),
      400,
      'bad_request',
    )
    assertError(
      await s.call('PATCH', `/users/${user.id}`, { body: '', contentType: 'application/json' }),
      400,
      'bad_request',
    )
    assertError(await s.call('POST', '/users'), 400, 'bad_request')
    assert.deepEqual(await s.snapshot(), [user])
  })
})

describe('the first fault answers (route → 503 → 401 → 403 → 415 → 413 → 400 → 404 → 412 → 422 → 409)', () => {
  const big = `{"name":"${'x'.repeat(KIB_64)}"}`
  const bigBroken = `{"name":"${'x'.repeat(KIB_64)}`

  it('route 404/405 before 401: no token needed to learn a path or method is wrong', async (t) => {
    const s = await startService(t)
    assertProblem(await s.call('GET', '/nowhere', { token: undefined }), 404, 'not_found')
    assertError(await s.call('DELETE', '/users', { token: undefined }), 405, 'method_not_allowed')
    assertError(
      await s.call('GET', `/users/${UNKNOWN_ID}:activate`, { token: undefined }),
      405,
      'method_not_allowed',
    )
    assertError(
      await s.call('POST', `/users/${UNKNOWN_ID}:explode`, { token: undefined }),
      404,
      'not_found',
    )
  })

  it('401 before 403: an expired token without scopes is token_expired', async (t) => {
    const s = await startService(t)
    assertError(
      await s.call('GET', '/users', { token: makeToken({ ttl: -3600, scope: null }) }),
      401,
      'token_expired',
    )
    assertError(
      await s.call('POST', '/users', {
        token: makeToken({ scope: 'users:read', secret: 'wrong-secret-0123456789-abcdefghijklmn' }),
        json: { email: uniqueEmail(), name: 'X' },
      }),
      401,
      'token_invalid',
    )
    assert.deepEqual(await s.snapshot(), [])
  })

  it('401 before 415, 413, 400 and the user 404', async (t) => {
    const s = await startService(t)
    const none = { token: undefined }
    assertError(
      await s.call('POST', '/users', { ...none, body: '{}', contentType: 'text/plain' }),
      401,
      'token_missing',
    )
    assertError(
      await s.call('POST', '/users', { ...none, body: big, contentType: 'application/json' }),
      401,
      'token_missing',
    )
    assertError(
      await s.call('POST', '/users', { ...none, body: '{', contentType: 'application/json' }),
      401,
      'token_missing',
    )
    assertError(await s.call('GET', '/users?limit=0', none), 401, 'token_missing')
    assertError(await s.call('GET', '/users/%ZZ', none), 401, 'token_missing')
    for (const id of ['not-a-uuid', UNKNOWN_ID, UNKNOWN_ID.toUpperCase()]) {
      assertError(await s.call('GET', `/users/${id}`, none), 401, 'token_missing')
      assertError(await s.call('POST', `/users/${id}:activate`, none), 401, 'token_missing')
    }
    assert.deepEqual(await s.snapshot(), [])
  })

  it('403 before 415, 413, 400 and the user 404', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const reader = { token: makeToken({ scope: 'users:read' }) }
    assertError(
      await s.call('POST', '/users', { ...reader, body: '{}', contentType: 'text/plain' }),
      403,
      'insufficient_scope',
    )
    assertError(
      await s.call('POST', '/users', { ...reader, body: big, contentType: 'application/json' }),
      403,
      'insufficient_scope',
    )
    assertError(
      await s.call('PATCH', `/users/${user.id}`, {
        ...reader,
        body: '{',
        contentType: 'application/json',
      }),
      403,
      'insufficient_scope',
    )
    assertError(await s.call('DELETE', '/users/%ZZ', reader), 403, 'insufficient_scope')
    assertError(await s.call('DELETE', `/users/${UNKNOWN_ID}`, reader), 403, 'insufficient_scope')
    assert.deepEqual(await s.snapshot(), [user])
  })

  it('415 before 413 and 400', async (t) => {
    const s = await startService(t)
    assertError(
      await s.call('POST', '/users', { body: big, contentType: 'text/plain' }),
      415,
      'unsupported_media_type',
    )
    assertError(
      await s.call('POST', '/users', { body: '{', contentType: 'text/plain' }),
      415,
      'unsupported_media_type',
    )
    const announced = await sendOverSocket(s.url, {
      method: 'POST',
      target: '/users',
      headers: {
        authorization: `Bearer ${s.token}`,
        'content-type': 'text/plain',
        'content-length': '10000000',
      },
    })
    assert.equal(announced.status, 415, announced.text)
    assert.equal(codeOf(announced), 'unsupported_media_type')
    assert.deepEqual(await s.snapshot(), [])
  })

  it('413 before 400: an oversized body is refused before it is parsed', async (t) => {
    const s = await startService(t)
    assertError(
      await s.call('POST', '/users', { body: bigBroken, contentType: 'application/json' }),
      413,
      'payload_too_large',
    )
    assertError(
      await s.call('PATCH', '/users/%ZZ', { body: big, contentType: 'application/json' }),
      413,
      'payload_too_large',
    )
    assert.deepEqual(await s.snapshot(), [])
  })

  it('400 before the user 404: bad JSON or a bad escape on an unknown id is a 400', async (t) => {
    const s = await startService(t)
    assertError(
      await s.call('PUT', `/users/${UNKNOWN_ID}`, { body: '{', contentType: 'application/json' }),
      400,
      'bad_request',
    )
    assertError(
      await s.call('PATCH', `/users/${UNKNOWN_ID}`, { body: '{', contentType: 'application/json' }),
      400,
      'bad_request',
    )
    assertError(
      await s.call('POST', `/users/${UNKNOWN_ID}:activate`, {
        body: '{',
        contentType: 'application/json',
      }),
      400,
      'bad_request',
    )
    assertError(await s.call('GET', `/users/${UNKNOWN_ID}%FF`), 400, 'bad_request')
  })

  it('the user 404 before 412 and 422', async (t) => {
    const s = await startService(t)
    const stale = { 'if-match': '"stale"' }
    assertError(
      await s.call('PATCH', `/users/${UNKNOWN_ID}`, { json: { name: 'X' }, headers: stale }),
      404,
      'not_found',
    )
    assertError(
      await s.call('DELETE', `/users/${UNKNOWN_ID}`, { headers: stale }),
      404,
      'not_found',
    )
    assertError(
      await s.call('POST', `/users/${UNKNOWN_ID}:suspend`, { headers: stale }),
      404,
      'not_found',
    )
    assertError(
      await s.call('PATCH', `/users/${UNKNOWN_ID}`, { json: { name: '' } }),
      404,
      'not_found',
    )
    assertError(
      await s.call('PUT', `/users/${UNKNOWN_ID}`, { json: { email: 'bad' } }),
      404,
      'not_found',
    )
    assertError(
      await s.call('POST', `/users/${UNKNOWN_ID}:activate`, { json: { reason: 'x' } }),
      404,
      'not_found',
    )
    assert.deepEqual(await s.snapshot(), [])
  })

  it('412 before 422 and 409', async (t) => {
    const s = await startService(t)
    const a = await s.createUser()
    const b = await s.createUser()
    const stale = { 'if-match': '"stale"' }
    assertError(
      await s.call('PATCH', `/users/${b.id}`, { json: { name: '' }, headers: stale }),
      412,
      'precondition_failed',
    )
    assertError(
      await s.call('PUT', `/users/${b.id}`, {
        json: { email: a.email, name: 'B' },
        headers: stale,
      }),
      412,
      'precondition_failed',
    )
    assertError(
      await s.call('POST', `/users/${b.id}:suspend`, { headers: stale }),
      412,
      'precondition_failed',
    )
    assertError(
      await s.call('POST', `/users/${b.id}:activate`, { json: { reason: 'x' }, headers: stale }),
      412,
      'precondition_failed',
    )
    assert.deepEqual(await s.snapshot(), [a, b])
  })

  it('422 before 409', async (t) => {
    const s = await startService(t)
    const a = await s.createUser()
    const b = await s.createUser()
    assertError(
      await s.call('POST', '/users', { json: { email: a.email, name: '' } }),
      422,
      'validation_failed',
    )
    assertError(
      await s.call('PATCH', `/users/${b.id}`, { json: { email: a.email, name: '' } }),
      422,
      'validation_failed',
    )
    assertError(
      await s.call('PUT', `/users/${b.id}`, {
        json: { email: a.email.toUpperCase(), name: 'B', extra: 1 },
      }),
      422,
      'validation_failed',
    )
    // b is pending, so :suspend alone would be 409 invalid_transition; the body is wrong first.
    assertError(
      await s.call('POST', `/users/${b.id}:suspend`, { json: { reason: 'x' } }),
      422,
      'validation_failed',
    )
    assert.deepEqual(await s.snapshot(), [a, b])
  })
})

describe('X-Request-Id', () => {
  it('echoes a sane id on a success and in an error body', async (t) => {
    const s = await startService(t)
    const id = 'req-Abc_1.2-3'
    const ok = await s.call('GET', '/users', { headers: { 'x-request-id': id } })
    assert.equal(ok.status, 200)
    assert.equal(ok.headers.get('x-request-id'), id)
    const problem = assertError(
      await s.call('GET', `/users/${UNKNOWN_ID}`, { headers: { 'x-request-id': id } }),
      404,
      'not_found',
    )
    assert.equal(problem.requestId, id)
  })

  it('echoes an id of exactly 128 sane characters', async (t) => {
    const s = await startService(t)
    const id = `${'a'.repeat(120)}._-AZ09x`
    assert.equal(id.length, 128)
    assert.equal(
      (await request('GET', `${s.url}/healthz`, { headers: { 'x-request-id': id } })).headers.get(
        'x-request-id',
      ),
      id,
    )
  })

  const insane: [string, string][] = [
    ['129 characters', 'b'.repeat(129)],
    ['a space', 'bad id'],
    ['a slash', 'a/b'],
    ['a colon', 'a:b'],
    ['quotes and angle brackets', '"<script>"'],
    ['a comma', 'a,b'],
    ['a Latin-1 letter', 'caf\u00e9'],
    ['nothing', ''],
  ]
  for (const [name, bad] of insane) {
    it(`replaces an id with ${name} by a made one`, async (t) => {
      const s = await startService(t)
      const res = await s.call('GET', `/users/${UNKNOWN_ID}`, { headers: { 'x-request-id': bad } })
      const made = res.headers.get('x-request-id') ?? ''
      assert.notEqual(made, bad)
      assert.match(made, SANE_ID)
      assert.equal(assertError(res, 404, 'not_found').requestId, made)
    })
  }

  it('replaces two X-Request-Id headers (joined by the server) by a made one', async (t) => {
    const s = await startService(t)
    const res = await sendOverSocket(s.url, {
      method: 'GET',
      target: '/healthz',
      headers: { 'x-request-id': 'one' },
    })
    assert.equal(res.headers.get('x-request-id'), 'one')
    const twice = await sendOverSocket(s.url, {
      method: 'GET',
      target: '/healthz',
      headers: { 'x-request-id': 'one\r\nx-request-id: two' },
    })
    const made = twice.headers.get('x-request-id') ?? ''
    assert.equal(twice.status, 200)
    assert.ok(made !== 'one' && made !== 'two' && made !== 'one, two', made)
    assert.match(made, SANE_ID)
  })

  it('makes a distinct id for each answer that came without one', async (t) => {
    const s = await startService(t)
    const answers = [
      await s.call('GET', '/users'),
      await s.call('GET', '/users'),
      await s.call('GET', `/users/${UNKNOWN_ID}`),
      await request('GET', `${s.url}/healthz`),
      await request('GET', `${s.url}/nowhere`),
    ]
    const ids = answers.map((res) => res.headers.get('x-request-id') ?? '')
    for (const id of ids) assert.match(id, SANE_ID)
    assert.equal(new Set(ids).size, ids.length, ids.join(' '))
  })
})

describe('request logs', () => {
  it('writes one JSON line per request with time, level, requestId, method, path, status, durationMs and sub', async (t) => {
    const lines: string[] = []
    const s = await startService(t, {
      logger: createJsonLogger({
        write: (line) => {
          lines.push(line)
        },
      }),
    })
    const sub = `log-subject-${process.pid}`
    const token = makeToken({ sub })
    const id = 'log-line-check-1'
    const res = await s.call('POST', '/users', {
      token,
      json: { email: uniqueEmail('log'), name: 'Logged' },
      headers: { 'x-request-id': id },
    })
    assert.equal(res.status, 201, res.text)
    await s.call('GET', '/users?limit=1', {
      token,
      headers: { 'x-request-id': 'log-line-check-2' },
    })
    const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
    const mine = entries.filter((entry) => entry['requestId'] === id)
    assert.equal(mine.length, 1, JSON.stringify(mine))
    const [entry] = mine
    assert.equal(entry?.['msg'], 'request')
    assert.equal(entry?.['level'], 'info')
    assert.ok(
      !Number.isNaN(Date.parse(String(entry?.['time']))),
      `time: ${String(entry?.['time'])}`,
    )
    assert.equal(entry?.['method'], 'POST')
    assert.equal(entry?.['path'], '/users')
    assert.equal(entry?.['status'], 201)
    assert.equal(typeof entry?.['durationMs'], 'number')
    assert.ok(Number(entry?.['durationMs']) >= 0)
    assert.equal(entry?.['sub'], sub)
    const listed = entries.find((line) => line['requestId'] === 'log-line-check-2')
    assert.equal(listed?.['path'], '/users')
    assert.equal(listed?.['status'], 200)
    for (const line of lines)
      assert.ok(line.endsWith('\n') && !line.slice(0, -1).includes('\n'), line)
  })

  it('logs refused requests too, and never the token or the secret', async (t) => {
    const s = await startService(t)
    const expired = makeToken({ ttl: -3600 })
    const forged = makeToken({ secret: 'forged-secret-0123456789-abcdefghijklm' })
    const sent = [
      await s.call('GET', '/users'),
      await s.call('GET', '/users', { token: expired }),
      await s.call('GET', '/users', { token: forged }),
      await s.call('GET', '/users', { token: 'garbage.token.here' }),
      await s.call('DELETE', '/users'),
      await s.call('GET', `/users/${UNKNOWN_ID}`),
    ]
    for (const res of sent) {
      const id = res.headers.get('x-request-id')
      const lines = s.logs.filter((line) => line['msg'] === 'request' && line['requestId'] === id)
      assert.equal(lines.length, 1, `request ${id ?? ''}`)
      assert.equal(lines[0]?.['status'], res.status)
    }
    const text = JSON.stringify(s.logs)
    for (const token of [s.token, expired, forged, 'garbage.token.here']) {
      assert.ok(!text.includes(token), 'a token appears in the logs')
      assert.ok(
        !text.includes(token.split('.')[2] ?? token),
        'a token signature appears in the logs',
      )
    }
    assert.ok(!text.includes(TEST_SECRET), 'the secret appears in the logs')
  })

  it('logs the sub of the token, and none for anonymous requests', async (t) => {
    const s = await startService(t)
    await s.call('GET', '/users', { headers: { 'x-request-id': 'with-sub' } })
    await request('GET', `${s.url}/healthz`, { headers: { 'x-request-id': 'without-sub' } })
    assert.equal(s.logs.find((line) => line['requestId'] === 'with-sub')?.['sub'], 'tester')
    const anonymous = s.logs.find((line) => line['requestId'] === 'without-sub')
    assert.equal(anonymous?.['status'], 200)
    assert.equal(anonymous['sub'], undefined)
  })
})

describe('users created under error conditions', () => {
  it('shows a created user exactly once after a mix of refusals', async (t) => {
    const s = await startService(t)
    await s.call('POST', '/users', { body: '{', contentType: 'application/json' })
    await s.call('POST', '/users', {
      token: undefined,
      json: { email: uniqueEmail(), name: 'Anon' },
    })
    const created = await s.call('POST', '/users', { json: { email: uniqueEmail(), name: 'Kept' } })
    assert.equal(created.status, 201)
    assert.deepEqual(
      (await s.snapshot()).map((user: User) => user.name),
      ['Kept'],
    )
  })
})
