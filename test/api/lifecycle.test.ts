import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import type { User, UserStatus } from '../../src/domain/user.js'
import { assertProblem, type RequestOptions, type TestResponse } from '../helpers/http.js'
import { exchange } from '../helpers/raw-exchange.js'
import { startService, type TestService } from '../helpers/service.js'
import {
  assertFieldErrors,
  assertUnchangedBy,
  createTestClock,
  readUserFiles,
  type TestClock,
} from '../helpers/users-suite.js'

const UNKNOWN_ID = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'
type Action = 'activate' | 'suspend'

interface Setup {
  s: TestService
  clock: TestClock
}

async function setup(t: TestContext): Promise<Setup> {
  const clock = createTestClock()
  const s = await startService(t, { now: clock.now })
  return { s, clock }
}

function act(
  s: TestService,
  id: string,
  action: Action,
  options: RequestOptions = {},
): Promise<TestResponse> {
  return s.call('POST', `/users/${id}:${action}`, options)
}

function assertUser(res: TestResponse): User {
  assert.equal(res.status, 200, res.text)
  const user = res.json<User>()
  assert.equal(res.headers.get('etag'), `"v${user.version}"`)
  assert.equal(res.headers.get('cache-control'), 'no-store')
  return user
}

/** A user in `status`, reached through the custom methods. */
async function userIn(s: TestService, status: UserStatus): Promise<User> {
  const user = await s.createUser()
  if (status === 'pending') return user
  const active = assertUser(await act(s, user.id, 'activate'))
  if (status === 'active') return active
  return assertUser(await act(s, user.id, 'suspend'))
}

/** §2: the whole transition table, each cell reached from a fresh user. */
const CHANGES: ReadonlyArray<[UserStatus, Action, UserStatus]> = [
  ['pending', 'activate', 'active'],
  ['suspended', 'activate', 'active'],
  ['active', 'suspend', 'suspended'],
]
const REPEATS: ReadonlyArray<[UserStatus, Action]> = [
  ['active', 'activate'],
  ['suspended', 'suspend'],
]

describe('POST /users/{id}:activate and :suspend', () => {
  for (const [from, action, to] of CHANGES) {
    it(`takes a ${from} user to ${to} on :${action}, bumping version and updatedAt`, async (t) => {
      const { s, clock } = await setup(t)
      const user = await userIn(s, from)
      clock.advance(1500)
      const res = await act(s, user.id, action)
      const changed = assertUser(res)
      assert.deepEqual(changed, {
        ...user,
        status: to,
        version: user.version + 1,
        updatedAt: new Date(clock.now()).toISOString(),
      })
      assert.notEqual(res.headers.get('etag'), `"v${user.version}"`)
      assert.deepEqual(await s.getUser(user.id), changed)
      assert.equal((await readUserFiles(s.dataDir))[`${user.id}.json`], res.text)
    })
  }

  for (const [from, action] of REPEATS) {
    it(`answers 200 and keeps a ${from} user unchanged on :${action} (version, updatedAt, ETag)`, async (t) => {
      const { s, clock } = await setup(t)
      const user = await userIn(s, from)
      clock.advance(1500)
      const before = await readUserFiles(s.dataDir)
      for (let i = 0; i < 2; i += 1) {
        const res = await act(s, user.id, action)
        assert.deepEqual(assertUser(res), user)
        assert.equal(res.headers.get('etag'), `"v${user.version}"`)
      }
      assert.deepEqual(await s.getUser(user.id), user)
      assert.deepEqual(await readUserFiles(s.dataDir), before)
    })
  }

  it('returns 409 invalid_transition for :suspend of a pending user, changing nothing', async (t) => {
    const { s, clock } = await setup(t)
    const user = await s.createUser()
    clock.advance(1000)
    const res = await assertUnchangedBy(s, () => act(s, user.id, 'suspend'))
    assertProblem(res, 409, 'invalid_transition')
    assert.deepEqual(await s.getUser(user.id), user)
  })

  it('walks pending → active → suspended → active, one version per change', async (t) => {
    const { s, clock } = await setup(t)
    const user = await s.createUser()
    const steps: Array<[Action, UserStatus, number]> = [
      ['activate', 'active', 2],
      ['activate', 'active', 2],
      ['suspend', 'suspended', 3],
      ['suspend', 'suspended', 3],
      ['activate', 'active', 4],
    ]
    for (const [action, status, version] of steps) {
      clock.advance(10)
      const after = assertUser(await act(s, user.id, action))
      assert.equal(after.status, status, action)
      assert.equal(after.version, version, action)
    }
  })

  it('takes no body, an empty body or {}', async (t) => {
    const { s } = await setup(t)
    const user = await s.createUser()
    const bodies: Array<[string, RequestOptions]> = [
      ['no body', {}],
      ['an empty JSON body', { body: '', contentType: 'application/json' }],
      ['{}', { json: {} }],
      ['{} with charset', { body: '{ }', contentType: 'application/json; charset=utf-8' }],
    ]
    for (const [label, options] of bodies) {
      await t.test(label, async () => {
        assert.equal(assertUser(await act(s, user.id, 'activate', options)).status, 'active')
        assert.equal(assertUser(await act(s, user.id, 'suspend', options)).status, 'suspended')
      })
    }
  })

  it('refuses other JSON with a 422, changing nothing', async (t) => {
    const { s } = await setup(t)
    const user = await s.createUser()
    const cases: Array<[string, string, string]> = [
      ['an object with a field', '{"reason":"spam"}', '/reason'],
      ['an object with status', '{"status":"active"}', '/status'],
      ['an array', '[]', ''],
      ['a string', '"activate"', ''],
      ['a number', '1', ''],
      ['null', 'null', ''],
      ['true', 'true', ''],
    ]
    for (const action of ['activate', 'suspend'] as const) {
      for (const [label, body, pointer] of cases) {
        await t.test(`:${action} with ${label}`, async () => {
          const res = await assertUnchangedBy(s, () =>
            act(s, user.id, action, { body, contentType: 'application/json' }),
          )
          assertFieldErrors(res, [{ pointer }])
        })
      }
    }
  })

  it('gives each field of an object body its own entry', async (t) => {
    const { s } = await setup(t)
    const user = await s.createUser()
    const res = await assertUnchangedBy(s, () =>
      act(s, user.id, 'activate', { json: { a: 1, b: 2 } }),
    )
    assertFieldErrors(res, [{ pointer: '/a' }, { pointer: '/b' }])
  })

  it('refuses invalid JSON with 400 bad_request, changing nothing', async (t) => {
    const { s } = await setup(t)
    const user = await s.createUser()
    for (const body of ['{', '{"a":}', 'nope', '{}x', '\u00ff']) {
      const res = await assertUnchangedBy(s, () =>
        act(s, user.id, 'activate', { body, contentType: 'application/json' }),
      )
      assertProblem(res, 400, 'bad_request')
    }
  })

  it('refuses a body of another media type or without a Content-Type with 415, changing nothing', async (t) => {
    const { s } = await setup(t)
    const user = await s.createUser()
    const cases: Array<[string, RequestOptions]> = [
      ['text/plain', { body: '{}', contentType: 'text/plain' }],
      ['a form', { body: 'a=b', contentType: 'application/x-www-form-urlencoded' }],
      ['no Content-Type', { body: Buffer.from('{}') }],
    ]
    for (const action of ['activate', 'suspend'] as const) {
      for (const [label, options] of cases) {
        await t.test(`:${action} with ${label}`, async () => {
          const res = await assertUnchangedBy(s, () => act(s, user.id, action, options))
          assertProblem(res, 415, 'unsupported_media_type')
        })
      }
    }
  })

  // A chunked body announces no length: one with no byte is an empty body, as Content-Length: 0
  // is, and needs no Content-Type; one byte without a Content-Type is 415, as ever.
  it('takes an empty chunked body without a Content-Type; a chunked byte without one is 415', async (t) => {
    const { s } = await setup(t)
    const user = await s.createUser()
    const chunked = (path: string, chunks: string): string =>
      `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${s.token}\r\n` +
      `Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunks}0\r\n\r\n`
    const refused = await assertUnchangedBy(s, () =>
      exchange(s.url, chunked(`/users/${user.id}:activate`, '2\r\n{}\r\n')),
    )
    assert.equal(refused.response?.status, 415, refused.raw)
    assert.match(refused.raw, /"code":"unsupported_media_type"/)
    const empty = await exchange(s.url, chunked(`/users/${user.id}:activate`, ''))
    assert.equal(empty.response?.status, 200, empty.raw)
    assert.equal((await s.getUser(user.id)).status, 'active')
    // POST /users needs a body: an empty one is 400 whether chunked or not; bytes without a
    // Content-Type are 415, and a streamed import refuses an untyped body at its head.
    const body = JSON.stringify({ email: 'chunked@example.com', name: 'Chunked' })
    const cases: Array<[string, string, number]> = [
      ['/users', '', 400],
      ['/users', `${body.length.toString(16)}\r\n${body}\r\n`, 415],
      ['/users:import', `${(body.length + 1).toString(16)}\r\n${body}\n\r\n`, 415],
    ]
    for (const [path, chunks, status] of cases) {
      const res = await assertUnchangedBy(s, () => exchange(s.url, chunked(path, chunks)))
      assert.equal(res.response?.status, status, `${path} ${JSON.stringify(chunks)}: ${res.raw}`)
    }
  })

  it('returns 404 for unknown ids, changing nothing', async (t) => {
    const { s } = await setup(t)
    await s.createUser()
    for (const action of ['activate', 'suspend'] as const) {
      for (const id of [UNKNOWN_ID, 'nobody']) {
        const res = await assertUnchangedBy(s, () => act(s, id, action))
        assertProblem(res, 404, 'not_found')
      }
    }
  })

  it('returns 404 for a deleted user', async (t) => {
    const { s } = await setup(t)
    const user = await s.createUser()
    assert.equal((await s.call('DELETE', `/users/${user.id}`)).status, 204)
    assertProblem(await act(s, user.id, 'activate'), 404, 'not_found')
  })

  it('keeps the status through a later PATCH', async (t) => {
    const { s } = await setup(t)
    const user = await userIn(s, 'suspended')
    const patched = assertUser(
      await s.call('PATCH', `/users/${user.id}`, { json: { name: 'Renamed' } }),
    )
    assert.equal(patched.status, 'suspended')
    assert.equal(patched.version, user.version + 1)
  })
})
