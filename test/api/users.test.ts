import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { readUserFile, TIMESTAMP } from '../helpers/data-files.js'
import { assertProblem, type TestResponse } from '../helpers/http.js'
import { makeTempDir, startService, type TestService } from '../helpers/service.js'
import {
  assertFieldErrors,
  assertUnchangedBy,
  captureState,
  createTestClock,
  type ExpectedFieldError,
  makeEmail,
  readUserFiles,
  UUID7_PATTERN,
  uuid7Millis,
} from '../helpers/users-suite.js'

const EMOJI = '😀'
const UNKNOWN_ID = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

function metadataOf(count: number): Record<string, string> {
  return Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}`, `v${i}`]))
}

function post(s: TestService, json: unknown): Promise<TestResponse> {
  return s.call('POST', '/users', { json })
}

function put(s: TestService, id: string, json: unknown): Promise<TestResponse> {
  return s.call('PUT', `/users/${id}`, { json })
}

function patch(s: TestService, id: string, json: unknown): Promise<TestResponse> {
  return s.call('PATCH', `/users/${id}`, { json })
}

/** A raw JSON text body, for bodies JSON.stringify cannot spell (own `__proto__` keys). */
function sendRaw(
  s: TestService,
  method: string,
  target: string,
  body: string,
  contentType = 'application/json',
): Promise<TestResponse> {
  return s.call(method, target, { body, contentType })
}

function assertUser(res: TestResponse, status: number): User {
  assert.equal(res.status, status, res.text)
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
  return res.json<User>()
}

function assertStrongEtag(res: TestResponse, user: User): string {
  const etag = res.headers.get('etag')
  assert.ok(etag !== null, 'an ETag')
  assert.match(etag, /^"[\x21\x23-\x7e]+"$/, 'a strong entity tag')
  assert.equal(etag, `"v${user.version}"`)
  return etag
}

/** Asserts a 422 with exactly these pointers (and codes) and that nothing was stored or changed. */
async function assertRefusedUnchanged(
  s: TestService,
  send: () => Promise<TestResponse>,
  expected: readonly ExpectedFieldError[],
): Promise<void> {
  const res = await assertUnchangedBy(s, send)
  assertFieldErrors(res, expected)
}

describe('POST /users', () => {
  it('returns 201 with the user, a Location and a strong ETag, and GET returns the same', async (t) => {
    const s = await startService(t)
    const res = await post(s, {
      email: 'ada@example.com',
      name: 'Ada Lovelace',
      metadata: { team: 'analytics' },
    })
    const user = assertUser(res, 201)
    assert.deepEqual(Object.keys(user), [
      'id',
      'email',
      'name',
      'status',
      'metadata',
      'createdAt',
      'updatedAt',
      'version',
    ])
    assert.equal(user.email, 'ada@example.com')
    assert.equal(user.name, 'Ada Lovelace')
    assert.equal(user.status, 'pending')
    assert.deepEqual(user.metadata, { team: 'analytics' })
    assert.equal(user.version, 1)
    assert.match(user.createdAt, ISO_MS)
    assert.equal(user.updatedAt, user.createdAt)
    assert.equal(res.headers.get('cache-control'), 'no-store')
    const etag = assertStrongEtag(res, user)
    const location = res.headers.get('location')
    assert.ok(location !== null, 'a Location')
    assert.equal(new URL(location, s.url).pathname, `/users/${user.id}`)

    const got = await s.call('GET', new URL(location, s.url).href)
    assert.deepEqual(assertUser(got, 200), user)
    assert.equal(got.headers.get('etag'), etag)
    assert.equal(got.text, res.text)
  })

  it('puts the Location under the base path', async (t) => {
    const s = await startService(t, { basePath: '/v1' })
    const res = await post(s, { email: 'ada@example.com', name: 'Ada' })
    const user = assertUser(res, 201)
    const location = res.headers.get('location')
    assert.ok(location !== null, 'a Location')
    const target = new URL(location, s.url)
    assert.equal(target.pathname, `/v1/users/${user.id}`)
    assert.deepEqual(assertUser(await s.call('GET', target.href), 200), user)
  })

  it('writes the user file exactly as the API returns it', async (t) => {
    const s = await startService(t)
    const res = await post(s, { email: 'ada@example.com', name: 'Ada', metadata: { a: 'b' } })
    const user = assertUser(res, 201)
    const files = await readUserFiles(s.dataDir)
    assert.deepEqual(Object.keys(files), [`${user.id}.json`])
    assert.equal(files[`${user.id}.json`], res.text)
  })

  it('defaults metadata to {}', async (t) => {
    const s = await startService(t)
    const user = assertUser(await post(s, { email: 'ada@example.com', name: 'Ada' }), 201)
    assert.deepEqual(user.metadata, {})
    assert.deepEqual((await s.getUser(user.id)).metadata, {})
  })

  it('assigns a lower-case UUIDv7 whose timestamp is the creation time', async (t) => {
    const clock = createTestClock(Date.now() - 5000)
    const s = await startService(t, { now: clock.now })
    for (let i = 0; i < 3; i += 1) {
      clock.advance(1234)
      const user = assertUser(await post(s, { email: `u${i}@example.com`, name: 'U' }), 201)
      assert.match(user.id, UUID7_PATTERN)
      assert.equal(uuid7Millis(user.id), clock.now())
      assert.equal(user.createdAt, new Date(clock.now()).toISOString())
      assert.equal(user.updatedAt, user.createdAt)
    }
  })

  it('assigns strictly increasing ids to many users created in the same millisecond', async (t) => {
    const fixed = Date.now()
    const s = await startService(t, { now: () => fixed, store: new MemoryStore() })
    const ids: string[] = []
    for (let i = 0; i < 40; i += 1) {
      const user = assertUser(
        await post(s, { email: `same.ms.${i}@example.com`, name: 'Same' }),
        201,
      )
      assert.match(user.id, UUID7_PATTERN)
      assert.equal(uuid7Millis(user.id), fixed)
      assert.equal(user.createdAt, new Date(fixed).toISOString())
      ids.push(user.id)
    }
    for (let i = 1; i < ids.length; i += 1)
      assert.ok((ids[i - 1] ?? '') < (ids[i] ?? ''), `ids ${i - 1} and ${i}`)
    assert.deepEqual(
      (await s.snapshot()).map((user) => user.id),
      ids,
    )
  })

  it("trims email and name and keeps the email's case", async (t) => {
    const s = await startService(t)
    const user = assertUser(
      await post(s, { email: '  Ada.Lovelace@Example.COM \n', name: '\t Ada Lovelace  ' }),
      201,
    )
    assert.equal(user.email, 'Ada.Lovelace@Example.COM')
    assert.equal(user.name, 'Ada Lovelace')
    assert.deepEqual(await s.getUser(user.id), user)
  })

  it('accepts every boundary value and stores it as given', async (t) => {
    const s = await startService(t)
    const bigMetadata = metadataOf(30)
    bigMetadata['k'.repeat(64)] = EMOJI.repeat(512)
    bigMetadata['empty'] = ''
    const cases: Array<[string, Record<string, unknown>]> = [
      ['a local part of 64 characters', { email: makeEmail(64, 80, 'a'), name: 'x' }],
      ['an address of 254 characters', { email: makeEmail(64, 254, 'b'), name: 'x' }],
      ['a name of 200 emoji code points', { email: 'c@example.com', name: EMOJI.repeat(200) }],
      [
        'a name with U+007E and U+00A0, next to the refused DEL and C1',
        { email: 'd@example.com', name: 'Ada~\u00a0Lovelace' },
      ],
      [
        '32 metadata keys, a 64-character key, a 512-code-point value, an empty value',
        { email: 'e@example.com', name: 'x', metadata: bigMetadata },
      ],
      [
        'a key of every allowed character class',
        { email: 'f@example.com', name: 'x', metadata: { 'Az09_.-': 'v' } },
      ],
    ]
    for (const [label, body] of cases) {
      await t.test(label, async () => {
        const user = assertUser(await post(s, body), 201)
        assert.equal(user.email, body['email'])
        assert.equal(user.name, body['name'])
        assert.deepEqual(user.metadata, body['metadata'] ?? {})
        assert.deepEqual(await s.getUser(user.id), user)
      })
    }
    // §9: DEL (U+007F) is a control character like C0 and C1, so it is no boundary value any more.
    await t.test('but not a name with DEL (U+007F): 422 invalid_characters', async () => {
      const body = { email: 'g@example.com', name: 'Ada\u007fLovelace' }
      await assertRefusedUnchanged(s, () => post(s, body), [
        { pointer: '/name', code: 'invalid_characters' },
      ])
    })
  })

  it('refuses every field rule with a 422 at its field, storing nothing', async (t) => {
    const s = await startService(t)
    await s.createUser({ email: 'existing@example.com' })
    const name = 'Ada'
    const email = 'ada@example.com'
    const LONG_KEY = 'k'.repeat(65)
    const cases: Array<[string, Record<string, unknown>, string, string]> = [
      ['email missing', { name }, '/email', 'required'],
      ['email empty', { email: '', name }, '/email', 'required'],
      ['email only spaces', { email: '   ', name }, '/email', 'required'],
      ['email a number', { email: 42, name }, '/email', 'invalid_type'],
      ['email null', { email: null, name }, '/email', 'required'],
      ['email without @', { email: 'ada.example.com', name }, '/email', 'invalid_format'],
      [
        'email with a space inside',
        { email: 'ada lovelace@example.com', name },
        '/email',
        'invalid_format',
      ],
      [
        'email with an empty local part',
        { email: '@example.com', name },
        '/email',
        'invalid_format',
      ],
      ['email without a domain', { email: 'ada@', name }, '/email', 'invalid_format'],
      [
        'email with a domain without a dot',
        { email: 'ada@example', name },
        '/email',
        'invalid_format',
      ],
      ['email with two @', { email: 'ada@lovelace@example.com', name }, '/email', 'invalid_format'],
      ['email with a local part of 65', { email: makeEmail(65, 90), name }, '/email', 'too_long'],
      ['email of 255 characters', { email: makeEmail(64, 255), name }, '/email', 'too_long'],
      ['name missing', { email }, '/name', 'required'],
      ['name empty', { email, name: '' }, '/name', 'required'],
      ['name only spaces', { email, name: '  \t ' }, '/name', 'required'],
      ['name a number', { email, name: 7 }, '/name', 'invalid_type'],
      ['name null', { email, name: null }, '/name', 'required'],
      ['name of 201 code points', { email, name: EMOJI.repeat(201) }, '/name', 'too_long'],
      ['name with NUL', { email, name: 'Ada\u0000Lovelace' }, '/name', 'invalid_characters'],
      ['name with BEL', { email, name: 'Ada\u0007Lovelace' }, '/name', 'invalid_characters'],
      ['name with ESC', { email, name: 'Ada\u001bLovelace' }, '/name', 'invalid_characters'],
      ['name with LF', { email, name: 'Ada\nLovelace' }, '/name', 'invalid_characters'],
      ['name with TAB', { email, name: 'Ada\tLovelace' }, '/name', 'invalid_characters'],
      ['name with U+0080', { email, name: 'Ada\u0080Lovelace' }, '/name', 'invalid_characters'],
      ['name with U+0085', { email, name: 'Ada\u0085Lovelace' }, '/name', 'invalid_characters'],
      ['name with U+009B', { email, name: 'Ada\u009bLovelace' }, '/name', 'invalid_characters'],
      ['metadata an array', { email, name, metadata: [] }, '/metadata', 'invalid_type'],
      ['metadata a string', { email, name, metadata: 'team=x' }, '/metadata', 'invalid_type'],
      ['metadata null', { email, name, metadata: null }, '/metadata', 'invalid_type'],
      [
        'metadata of 33 keys',
        { email, name, metadata: metadataOf(33) },
        '/metadata',
        'too_many_keys',
      ],
      [
        'metadata with an empty key',
        { email, name, metadata: { '': 'x' } },
        '/metadata/',
        'invalid_key',
      ],
      [
        'metadata with a 65-character key',
        { email, name, metadata: { [LONG_KEY]: 'x' } },
        `/metadata/${LONG_KEY}`,
        'invalid_key',
      ],
      [
        'metadata with a space in a key',
        { email, name, metadata: { 'a b': 'x' } },
        '/metadata/a b',
        'invalid_key',
      ],
      [
        'metadata with a slash in a key',
        { email, name, metadata: { 'a/b': 'x' } },
        '/metadata/a~1b',
        'invalid_key',
      ],
      [
        'metadata with a non-ASCII key',
        { email, name, metadata: { clé: 'x' } },
        '/metadata/clé',
        'invalid_key',
      ],
      [
        'metadata with a number value',
        { email, name, metadata: { n: 1 } },
        '/metadata/n',
        'invalid_type',
      ],
      [
        'metadata with a boolean value',
        { email, name, metadata: { b: false } },
        '/metadata/b',
        'invalid_type',
      ],
      [
        'metadata with an object value',
        { email, name, metadata: { o: { x: 'y' } } },
        '/metadata/o',
        'invalid_type',
      ],
      [
        'metadata with a 513-character value',
        { email, name, metadata: { s: 's'.repeat(513) } },
        '/metadata/s',
        'too_long',
      ],
      [
        'metadata with a 513-code-point value',
        { email, name, metadata: { e: EMOJI.repeat(513) } },
        '/metadata/e',
        'too_long',
      ],
    ]
    for (const [label, body, pointer, code] of cases) {
      await t.test(label, async () => {
        await assertRefusedUnchanged(s, () => post(s, body), [{ pointer, code }])
      })
    }
  })

  it('gives one entry per offending field', async (t) => {
    const s = await startService(t)
    await assertRefusedUnchanged(
      s,
      () =>
        post(s, {
          email: 'nope',
          name: '',
          metadata: { 'bad key': 1, fine: 'ok', n: 2 },
          status: 'active',
          extra: true,
        }),
      [
        { pointer: '/email', code: 'invalid_format' },
        { pointer: '/name', code: 'required' },
        { pointer: '/metadata/bad key', code: 'invalid_key' },
        { pointer: '/metadata/n', code: 'invalid_type' },
        { pointer: '/status', code: 'read_only' },
        { pointer: '/extra', code: 'unknown_field' },
      ],
    )
  })

  it('refuses unknown fields, each with its own entry', async (t) => {
    const s = await startService(t)
    await assertRefusedUnchanged(
      s,
      () =>
        post(s, {
          email: 'ada@example.com',
          name: 'Ada',
          role: 'admin',
          Name: 'x',
          password: null,
        }),
      [
        { pointer: '/role', code: 'unknown_field' },
        { pointer: '/Name', code: 'unknown_field' },
        { pointer: '/password', code: 'unknown_field' },
      ],
    )
  })

  it('treats __proto__ and constructor as unknown body fields, without polluting Object.prototype', async (t) => {
    const s = await startService(t)
    const before = Object.getOwnPropertyNames(Object.prototype)
    await assertRefusedUnchanged(
      s,
      () =>
        sendRaw(
          s,
          'POST',
          '/users',
          '{"email":"ada@example.com","name":"Ada","__proto__":{"polluted":"yes","status":"active"},' +
            '"constructor":{"prototype":{"polluted":"yes"}}}',
        ),
      [
        { pointer: '/__proto__', code: 'unknown_field' },
        { pointer: '/constructor', code: 'unknown_field' },
      ],
    )
    assert.deepEqual(Object.getOwnPropertyNames(Object.prototype), before)
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
  })

  it('stores __proto__ and constructor metadata keys as given, also after a restart', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const s = await startService(t, { dataDir })
    const before = Object.getOwnPropertyNames(Object.prototype)
    const res = await sendRaw(
      s,
      'POST',
      '/users',
      '{"email":"ada@example.com","name":"Ada","metadata":{"__proto__":"p","constructor":"c","toString":"t"}}',
    )
    const user = assertUser(res, 201)
    const expected: unknown = JSON.parse('{"__proto__":"p","constructor":"c","toString":"t"}')
    assert.deepEqual(user.metadata, expected)
    assert.equal(Object.hasOwn(user.metadata, '__proto__'), true)
    assert.match(res.text, /"metadata":\{"__proto__":"p","constructor":"c","toString":"t"\}/)
    assert.deepEqual((await s.getUser(user.id)).metadata, expected)
    assert.deepEqual(Object.getOwnPropertyNames(Object.prototype), before)

    await s.service.close()
    const reopened = await startService(t, { dataDir })
    const again = await reopened.call('GET', `/users/${user.id}`)
    assert.equal(again.status, 200)
    assert.equal(again.text, res.text)
  })

  it('refuses an object under a __proto__ metadata key without polluting Object.prototype', async (t) => {
    const s = await startService(t)
    await assertRefusedUnchanged(
      s,
      () =>
        sendRaw(
          s,
          'POST',
          '/users',
          '{"email":"ada@example.com","name":"Ada","metadata":{"__proto__":{"polluted":"yes"}}}',
        ),
      [{ pointer: '/metadata/__proto__', code: 'invalid_type' }],
    )
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
  })

  it('refuses bodies that are not JSON objects with a 422 at the root', async (t) => {
    const s = await startService(t)
    for (const body of [
      '[]',
      '[{"email":"ada@example.com","name":"Ada"}]',
      '"ada"',
      '42',
      'true',
      'null',
    ]) {
      await t.test(body, async () => {
        await assertRefusedUnchanged(s, () => sendRaw(s, 'POST', '/users', body), [{ pointer: '' }])
      })
    }
  })

  it('refuses each output-only field as read_only', async (t) => {
    const s = await startService(t)
    const fields: Record<string, unknown> = {
      id: UNKNOWN_ID,
      status: 'pending',
      createdAt: '2026-11-21T13:47:00.000Z',
      updatedAt: '2026-11-21T13:47:00.000Z',
      version: 1,
    }
    for (const [field, value] of Object.entries(fields)) {
      await t.test(field, async () => {
        await assertRefusedUnchanged(
          s,
          () => post(s, { email: 'ada@example.com', name: 'Ada', [field]: value }),
          [{ pointer: `/${field}`, code: 'read_only' }],
        )
      })
    }
  })

  it("returns 409 duplicate_email for another user's email in another case or with spaces around", async (t) => {
    const s = await startService(t)
    await s.createUser({ email: 'Ada@Example.com' })
    for (const email of [
      'Ada@Example.com',
      'ada@example.com',
      'ADA@EXAMPLE.COM',
      '  ada@Example.com\t',
    ]) {
      await t.test(JSON.stringify(email), async () => {
        const res = await assertUnchangedBy(s, () => post(s, { email, name: 'Other' }))
        assertProblem(res, 409, 'duplicate_email')
      })
    }
  })

  it('creates exactly one of several concurrent users with one email', async (t) => {
    const s = await startService(t)
    const emails = [
      'race@example.com',
      'Race@Example.com',
      'RACE@EXAMPLE.COM',
      ' race@example.com ',
      'race@EXAMPLE.com',
      'rAce@example.com',
      'race@example.com',
      'RACE@example.com',
    ]
    const answers = await Promise.all(emails.map((email) => post(s, { email, name: 'Racer' })))
    const created = answers.filter((res) => res.status === 201)
    assert.equal(created.length, 1, answers.map((res) => res.status).join(' '))
    for (const res of answers.filter((answer) => answer.status !== 201))
      assertProblem(res, 409, 'duplicate_email')
    const users = await s.snapshot()
    assert.equal(users.length, 1)
    assert.equal(users[0]?.email.toLowerCase(), 'race@example.com')
    assert.deepEqual(Object.keys(await readUserFiles(s.dataDir)), [`${users[0]?.id ?? ''}.json`])
  })
})

describe('PUT /users/{id}', () => {
  it('replaces every writable field; a missing metadata becomes {}', async (t) => {
    const clock = createTestClock()
    const s = await startService(t, { now: clock.now })
    const user = await s.createUser({
      email: 'ada@example.com',
      name: 'Ada',
      metadata: { team: 'analytics' },
    })
    clock.advance(1500)
    const res = await put(s, user.id, { email: ' Countess@Example.com ', name: ' Countess ' })
    const replaced = assertUser(res, 200)
    assert.deepEqual(replaced, {
      ...user,
      email: 'Countess@Example.com',
      name: 'Countess',
      metadata: {},
      version: 2,
      updatedAt: new Date(clock.now()).toISOString(),
    })
    assertStrongEtag(res, replaced)
    assert.notEqual(res.headers.get('etag'), `"v${user.version}"`)
    assert.deepEqual(await s.getUser(user.id), replaced)
    assert.equal((await readUserFiles(s.dataDir))[`${user.id}.json`], res.text)
  })

  it('accepts a GET-modify-PUT round trip with the output-only fields', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ metadata: { a: 'b' } })
    const changed = { ...(await s.getUser(user.id)), name: 'Renamed', metadata: { c: 'd' } }
    const replaced = assertUser(await put(s, user.id, changed), 200)
    assert.equal(replaced.name, 'Renamed')
    assert.deepEqual(replaced.metadata, { c: 'd' })
    assert.equal(replaced.version, 2)
    assert.equal(replaced.id, user.id)
    assert.equal(replaced.createdAt, user.createdAt)
  })

  it('keeps version, updatedAt and ETag for a PUT that changes nothing', async (t) => {
    const clock = createTestClock()
    const s = await startService(t, { now: clock.now })
    const user = await s.createUser({
      email: 'ada@example.com',
      name: 'Ada',
      metadata: { a: 'b', c: 'd' },
    })
    clock.advance(2000)
    const before = await readUserFiles(s.dataDir)
    // Metadata in another key order is another value (a change): see metadata-order.test.ts.
    for (const body of [
      { email: 'ada@example.com', name: 'Ada', metadata: { a: 'b', c: 'd' } },
      { email: '  ada@example.com ', name: ' Ada ', metadata: { a: 'b', c: 'd' } },
      { ...user },
    ]) {
      const res = await put(s, user.id, body)
      assert.deepEqual(assertUser(res, 200), user)
      assert.equal(res.headers.get('etag'), `"v${user.version}"`)
    }
    assert.deepEqual(await readUserFiles(s.dataDir), before)
  })

  it('refuses output-only fields that differ from the stored ones, pointing status to :activate and :suspend', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const changes: Record<string, unknown> = {
      id: UNKNOWN_ID,
      status: 'active',
      createdAt: '2000-01-01T00:00:00.000Z',
      updatedAt: '2000-01-01T00:00:00.000Z',
      version: 7,
    }
    for (const [field, value] of Object.entries(changes)) {
      await t.test(field, async () => {
        const res = await assertUnchangedBy(s, () =>
          put(s, user.id, { ...user, name: 'Changed', [field]: value }),
        )
        assertFieldErrors(res, [{ pointer: `/${field}`, code: 'read_only' }])
        const message = res.json<{ errors: Array<{ message: string }> }>().errors[0]?.message ?? ''
        assert.match(message, /read-only/)
        if (field === 'status') {
          assert.match(message, /:activate/)
          assert.match(message, /:suspend/)
        }
      })
    }
  })

  it('refuses metadata null as a wrong type', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ metadata: { a: 'b' } })
    await assertRefusedUnchanged(
      s,
      () => put(s, user.id, { email: user.email, name: user.name, metadata: null }),
      [{ pointer: '/metadata', code: 'invalid_type' }],
    )
  })

  it('refuses a body without the required fields, and bad values, storing nothing', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    await assertRefusedUnchanged(s, () => put(s, user.id, { metadata: {} }), [
      { pointer: '/email', code: 'required' },
      { pointer: '/name', code: 'required' },
    ])
    await assertRefusedUnchanged(
      s,
      () => put(s, user.id, { email: 'x@y', name: 'A\u0000', nickname: 'x' }),
      [
        { pointer: '/email', code: 'invalid_format' },
        { pointer: '/name', code: 'invalid_characters' },
        { pointer: '/nickname', code: 'unknown_field' },
      ],
    )
  })

  it('refuses bodies that are not JSON objects', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    for (const body of ['[]', '"x"', '1', 'true', 'null']) {
      await t.test(body, async () => {
        await assertRefusedUnchanged(s, () => sendRaw(s, 'PUT', `/users/${user.id}`, body), [
          { pointer: '' },
        ])
      })
    }
  })

  it("returns 409 duplicate_email for another user's email, in any case and with spaces", async (t) => {
    const s = await startService(t)
    await s.createUser({ email: 'taken@example.com' })
    const user = await s.createUser({ email: 'mine@example.com' })
    for (const email of ['taken@example.com', ' TAKEN@example.com ']) {
      const res = await assertUnchangedBy(s, () => put(s, user.id, { email, name: 'Mine' }))
      assertProblem(res, 409, 'duplicate_email')
    }
  })

  it('lets a user change the case of its own email', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ email: 'ada@example.com', name: 'Ada' })
    const res = await put(s, user.id, { email: 'ADA@example.com', name: 'Ada' })
    const replaced = assertUser(res, 200)
    assert.equal(replaced.email, 'ADA@example.com')
    assert.equal(replaced.version, 2)
  })

  it('returns 404 for an unknown id and creates nothing', async (t) => {
    const s = await startService(t)
    await s.createUser()
    for (const id of [UNKNOWN_ID, 'not-a-uuid']) {
      const res = await assertUnchangedBy(s, () =>
        put(s, id, { email: 'new@example.com', name: 'New' }),
      )
      assertProblem(res, 404, 'not_found')
    }
  })
})

describe('PATCH /users/{id}', () => {
  it('changes only the named fields', async (t) => {
    const clock = createTestClock()
    const s = await startService(t, { now: clock.now })
    const user = await s.createUser({
      email: 'ada@example.com',
      name: 'Ada',
      metadata: { a: '1', b: '2' },
    })
    clock.advance(1000)
    const res = await patch(s, user.id, { name: '  Countess ' })
    const patched = assertUser(res, 200)
    assert.deepEqual(patched, {
      ...user,
      name: 'Countess',
      version: 2,
      updatedAt: new Date(clock.now()).toISOString(),
    })
    assertStrongEtag(res, patched)
    assert.deepEqual(await s.getUser(user.id), patched)
    assert.equal((await readUserFiles(s.dataDir))[`${user.id}.json`], res.text)
  })

  it('merges metadata: null removes a key, a value sets one, the others stay', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ metadata: { a: '1', b: '2', c: '3' } })
    const patched = assertUser(
      await s.call('PATCH', `/users/${user.id}`, {
        json: { metadata: { a: null, b: 'two', d: '4', absent: null } },
      }),
      200,
    )
    assert.deepEqual(patched.metadata, { b: 'two', c: '3', d: '4' })
    assert.equal(patched.email, user.email)
    assert.equal(patched.name, user.name)
  })

  it('removes all metadata for metadata null', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ metadata: { a: '1', b: '2' } })
    const patched = assertUser(await patch(s, user.id, { metadata: null }), 200)
    assert.deepEqual(patched.metadata, {})
    assert.equal(patched.version, 2)
  })

  it('removes and sets __proto__ and constructor metadata keys like any other', async (t) => {
    const s = await startService(t)
    const created = await sendRaw(
      s,
      'POST',
      '/users',
      '{"email":"ada@example.com","name":"Ada","metadata":{"__proto__":"p","keep":"k"}}',
    )
    const user = assertUser(created, 201)
    const removed = assertUser(
      await sendRaw(
        s,
        'PATCH',
        `/users/${user.id}`,
        '{"metadata":{"__proto__":null,"constructor":"c"}}',
      ),
      200,
    )
    assert.deepEqual(removed.metadata, { keep: 'k', constructor: 'c' })
    assert.equal(({} as Record<string, unknown>)['keep'], undefined)
  })

  it('answers {} with 200 and changes nothing', async (t) => {
    const clock = createTestClock()
    const s = await startService(t, { now: clock.now })
    const user = await s.createUser({ metadata: { a: 'b' } })
    clock.advance(1000)
    const before = await readUserFiles(s.dataDir)
    const res = await patch(s, user.id, {})
    assert.deepEqual(assertUser(res, 200), user)
    assert.equal(res.headers.get('etag'), `"v${user.version}"`)
    assert.deepEqual(await readUserFiles(s.dataDir), before)
  })

  it('keeps version, updatedAt and ETag when it repeats the stored values', async (t) => {
    const clock = createTestClock()
    const s = await startService(t, { now: clock.now })
    const user = await s.createUser({ email: 'ada@example.com', name: 'Ada', metadata: { a: 'b' } })
    clock.advance(1000)
    for (const body of [
      { name: 'Ada' },
      { email: ' ada@example.com ', name: ' Ada' },
      { metadata: { a: 'b' } },
      { metadata: { gone: null } },
      { metadata: {} },
      { ...user },
    ]) {
      const res = await patch(s, user.id, body)
      assert.deepEqual(assertUser(res, 200), user, JSON.stringify(body))
      assert.equal(res.headers.get('etag'), `"v${user.version}"`)
    }
  })

  it('takes application/merge-patch+json and application/json', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const types = [
      'application/merge-patch+json',
      'application/json',
      'application/merge-patch+json; charset=utf-8',
      'Application/JSON',
    ]
    for (const [i, contentType] of types.entries()) {
      const res = await sendRaw(
        s,
        'PATCH',
        `/users/${user.id}`,
        JSON.stringify({ name: `Name ${i}` }),
        contentType,
      )
      const patched = assertUser(res, 200)
      assert.equal(patched.name, `Name ${i}`, contentType)
      assert.equal(patched.version, i + 2)
    }
  })

  it('refuses merged metadata over 32 keys, storing nothing', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ metadata: metadataOf(31) })
    await assertRefusedUnchanged(s, () => patch(s, user.id, { metadata: { x: '1', y: '2' } }), [
      { pointer: '/metadata', code: 'too_many_keys' },
    ])
    const swapped = assertUser(await patch(s, user.id, { metadata: { k0: null, x: '1' } }), 200)
    assert.equal(Object.keys(swapped.metadata).length, 31)
  })

  it('refuses null for name and email', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    for (const field of ['name', 'email']) {
      await assertRefusedUnchanged(s, () => patch(s, user.id, { [field]: null }), [
        { pointer: `/${field}`, code: 'required' },
      ])
    }
  })

  it('refuses bad values and unknown fields, one entry each, storing nothing', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    await assertRefusedUnchanged(
      s,
      () =>
        s.call('PATCH', `/users/${user.id}`, {
          json: {
            email: 'no-at',
            name: 'n'.repeat(201),
            metadata: { 'k/1': 'v', v: 5 },
            nick: 'x',
          },
        }),
      [
        { pointer: '/email', code: 'invalid_format' },
        { pointer: '/name', code: 'too_long' },
        { pointer: '/metadata/k~11', code: 'invalid_key' },
        { pointer: '/metadata/v', code: 'invalid_type' },
        { pointer: '/nick', code: 'unknown_field' },
      ],
    )
    await assertRefusedUnchanged(s, () => patch(s, user.id, { metadata: ['a'] }), [
      { pointer: '/metadata', code: 'invalid_type' },
    ])
  })

  it('accepts equal output-only fields and refuses different ones as read-only', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const echoed = {
      status: 'pending',
      version: 1,
      id: user.id,
      createdAt: user.createdAt,
      name: 'P',
    }
    const patched = assertUser(await patch(s, user.id, echoed), 200)
    assert.equal(patched.name, 'P')
    const res = await assertUnchangedBy(s, () => patch(s, user.id, { status: 'active' }))
    assertFieldErrors(res, [{ pointer: '/status', code: 'read_only' }])
    const message = res.json<{ errors: Array<{ message: string }> }>().errors[0]?.message ?? ''
    assert.match(message, /:activate/)
    assert.match(message, /:suspend/)
    await assertRefusedUnchanged(s, () => patch(s, user.id, { version: 1 }), [
      { pointer: '/version', code: 'read_only' },
    ])
  })

  it('refuses bodies that are not JSON objects', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    for (const body of ['[]', '"x"', '1', 'false', 'null']) {
      await t.test(body, async () => {
        const send = (): Promise<TestResponse> =>
          sendRaw(s, 'PATCH', `/users/${user.id}`, body, 'application/merge-patch+json')
        await assertRefusedUnchanged(s, send, [{ pointer: '' }])
      })
    }
  })

  it("returns 409 duplicate_email for another user's email", async (t) => {
    const s = await startService(t)
    await s.createUser({ email: 'Taken@Example.com' })
    const user = await s.createUser()
    for (const email of ['taken@example.com', '\tTAKEN@EXAMPLE.COM ']) {
      const res = await assertUnchangedBy(s, () => patch(s, user.id, { email }))
      assertProblem(res, 409, 'duplicate_email')
    }
  })

  it('lets exactly one of two users take a free email at the same time', async (t) => {
    const s = await startService(t)
    const first = await s.createUser()
    const second = await s.createUser()
    const answers = await Promise.all([
      patch(s, first.id, { email: 'wanted@example.com' }),
      patch(s, second.id, { email: 'WANTED@example.com' }),
    ])
    assert.deepEqual(answers.map((res) => res.status).sort(), [200, 409])
    const holders = (await s.snapshot()).filter(
      (user) => user.email.toLowerCase() === 'wanted@example.com',
    )
    assert.equal(holders.length, 1)
  })

  it('returns 404 for an unknown id and creates nothing', async (t) => {
    const s = await startService(t)
    await s.createUser()
    const res = await assertUnchangedBy(s, () => patch(s, UNKNOWN_ID, { name: 'Ghost' }))
    assertProblem(res, 404, 'not_found')
  })
})

describe('email uniqueness', () => {
  it('frees the email of a deleted user', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ email: 'Reuse@Example.com' })
    assertProblem(
      await post(s, { email: 'reuse@example.com', name: 'Second' }),
      409,
      'duplicate_email',
    )
    assert.equal((await s.call('DELETE', `/users/${user.id}`)).status, 204)
    const second = assertUser(await post(s, { email: 'reuse@example.com', name: 'Second' }), 201)
    assert.notEqual(second.id, user.id)
  })

  it('frees an email given up by a change, and holds the new one', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ email: 'old@example.com' })
    const other = await s.createUser({ email: 'other@example.com' })
    assertUser(await patch(s, user.id, { email: 'new@example.com' }), 200)
    assertUser(await post(s, { email: 'OLD@example.com', name: 'Taker' }), 201)
    assertProblem(
      await post(s, { email: 'NEW@example.com', name: 'Taker' }),
      409,
      'duplicate_email',
    )
    assertUser(await put(s, user.id, { email: 'newer@example.com', name: 'X' }), 200)
    assertUser(await patch(s, other.id, { email: 'new@example.com' }), 200)
  })
})

describe('DELETE /users/{id}', () => {
  it('answers 204 with no body, then 404, removes the file and leaves a tombstone with no personal data', async (t) => {
    const s = await startService(t)
    const keep = await s.createUser()
    const user = await s.createUser()
    const res = await s.call('DELETE', `/users/${user.id}`)
    assert.equal(res.status, 204)
    assert.equal(res.text, '')
    assertProblem(await s.call('GET', `/users/${user.id}`), 404, 'not_found')
    const after = await captureState(s)
    const again = await s.call('DELETE', `/users/${user.id}`)
    assertProblem(again, 404, 'not_found')
    assert.deepEqual(await captureState(s), after, 'a repeated DELETE changes nothing')
    assert.deepEqual(after.users, [keep])
    assert.deepEqual(Object.keys(after.files), [`${keep.id}.json`])
    const tombstone = readUserFile(s.dataDir, user.id, 'tombstones') ?? {}
    assert.deepEqual(Object.keys(tombstone), ['id', 'deletedAt'])
    assert.equal(tombstone['id'], user.id)
    assert.match(String(tombstone['deletedAt']), TIMESTAMP)
    assert.ok(!JSON.stringify(tombstone).includes(user.email), 'the tombstone holds no email')
  })

  it('returns 404 for an unknown id and changes nothing', async (t) => {
    const s = await startService(t)
    await s.createUser()
    const res = await assertUnchangedBy(s, () => s.call('DELETE', `/users/${UNKNOWN_ID}`))
    assertProblem(res, 404, 'not_found')
  })
})
