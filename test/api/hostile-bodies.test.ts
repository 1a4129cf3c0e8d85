import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { assertProblem, type TestResponse } from '../helpers/http.js'
import { startService, type TestService } from '../helpers/service.js'
import {
  assertFieldErrors,
  assertUnchangedBy,
  type ExpectedFieldError,
  readUserFiles,
} from '../helpers/users-suite.js'

type Method = 'POST' | 'PUT' | 'PATCH'
const METHODS: readonly Method[] = ['POST', 'PUT', 'PATCH']

/** A service holding one user, the target of PUT and PATCH. */
async function startWithUser(t: Parameters<typeof startService>[0]): Promise<[TestService, User]> {
  const s = await startService(t)
  const user = await s.createUser({ name: 'Ada Lovelace', metadata: { team: 'analytics' } })
  return [s, user]
}

/** Sends a body as it is (JSON text or raw bytes) to the route `method` writes through. */
function send(
  s: TestService,
  method: Method,
  user: User,
  body: string | Uint8Array,
): Promise<TestResponse> {
  const target = method === 'POST' ? '/users' : `/users/${user.id}`
  const contentType = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json'
  return s.call(method, target, { body, contentType })
}

/**
 * A JSON text from members given as raw JSON (so that `\ud800` escapes reach the parser as they
 * are). POST and PUT get a valid email and name unless the members replace them.
 */
function jsonText(method: Method, members: Readonly<Record<string, string>>): string {
  const base: Record<string, string> =
    method === 'PATCH' ? {} : { email: '"hostile@example.com"', name: '"Valid Name"' }
  const all = { ...base, ...members }
  return `{${Object.entries(all)
    .map(([key, value]) => `"${key}":${value}`)
    .join(',')}}`
}

/** Asserts a 422 with exactly these field errors, and that nothing was stored or changed. */
async function assertRefused(
  s: TestService,
  action: () => Promise<TestResponse>,
  expected: readonly ExpectedFieldError[],
): Promise<void> {
  const res = await assertUnchangedBy(s, action)
  assertFieldErrors(res, expected)
}

describe('lone surrogates in request bodies', () => {
  // Keys are raw JSON member names: `x\\ud800` is the six-character escape, not a code unit.
  const placements: Array<[string, Record<string, string>, ExpectedFieldError[]]> = [
    ['in email', { email: '"a\\ud800@example.com"' }, [{ pointer: '/email' }]],
    ['in name', { name: '"x\\ud800y"' }, [{ pointer: '/name' }]],
    ['alone as the name', { name: '"\\udbff"' }, [{ pointer: '/name' }]],
    ['as a pair in reverse order', { name: '"Ada \\ude00\\ud83d"' }, [{ pointer: '/name' }]],
    ['in a metadata value', { metadata: '{"k":"\\udfff"}' }, [{ pointer: '/metadata/k' }]],
    ['in a metadata key', { metadata: '{"k\\udc00":"v"}' }, [{ pointer: '/metadata/k\udc00' }]],
    ['in an unknown field', { nickname: '"\\udc00"' }, [{ pointer: '/nickname' }]],
    ['deep in an unknown field', { extra: '{"a":[1,{"b":"\\ud800"}]}' }, [{ pointer: '/extra' }]],
    ['in the name of an unknown field', { 'x\\ud800': '1' }, [{ pointer: '/x\ud800' }]],
    ['in a read-only field', { status: '"active\\udfff"' }, [{ pointer: '/status' }]],
    [
      'in email, name and a metadata value at once',
      { email: '"a\\ud800@example.com"', name: '"x\\ud800y"', metadata: '{"k":"\\udfff"}' },
      [{ pointer: '/email' }, { pointer: '/name' }, { pointer: '/metadata/k' }],
    ],
  ]

  it('is a 422 invalid_characters at its field on POST, PUT and PATCH', async (t) => {
    const [s, user] = await startWithUser(t)
    for (const method of METHODS) {
      for (const [label, members, pointers] of placements) {
        await t.test(`${method} ${label}`, async () => {
          const expected = pointers.map(({ pointer }) => ({ pointer, code: 'invalid_characters' }))
          await assertRefused(s, () => send(s, method, user, jsonText(method, members)), expected)
        })
      }
    }
  })

  it('as UTF-8 bytes (ED A0 80 and the like) is a 400 from the fatal decoder', async (t) => {
    const [s, user] = await startWithUser(t)
    const encoded = [
      [0xed, 0xa0, 0x80],
      [0xed, 0xaf, 0xbf],
      [0xed, 0xb0, 0x80],
      [0xed, 0xbf, 0xbf],
    ]
    for (const method of METHODS) {
      for (const bytes of encoded) {
        await t.test(`${method} with ${Buffer.from(bytes).toString('hex')}`, async () => {
          const text = jsonText(method, { name: '"Ada SURROGATE"' })
          const [head = '', tail = ''] = text.split('SURROGATE')
          const body = Buffer.concat([Buffer.from(head), Buffer.from(bytes), Buffer.from(tail)])
          const res = await assertUnchangedBy(s, () => send(s, method, user, body))
          assertProblem(res, 400, 'bad_request')
        })
      }
    }
  })

  it('leaves the code points next to the surrogates, and valid pairs, as sent', async (t) => {
    const [s, existing] = await startWithUser(t)
    const name = 'x\ud7ff\ue000\ud83d\ude00\udbff\udfffy'
    const escaped = 'x\\ud7ff\\ue000\\ud83d\\ude00\\udbff\\udfffy'
    const text = `{"email":"edges@example.com","name":"${escaped}"}`
    const res = await send(s, 'POST', existing, text)
    assert.equal(res.status, 201, res.text)
    const user = res.json<User>()
    assert.equal(user.name, name)
    assert.deepEqual(await s.getUser(user.id), user)
    const file = (await readUserFiles(s.dataDir))[`${user.id}.json`] ?? ''
    assert.equal((JSON.parse(file) as User).name, name)
  })
})

describe('names and emails that cannot be seen', () => {
  it('refuses DEL (U+007F) in a name with 422 invalid_characters', async (t) => {
    const [s, user] = await startWithUser(t)
    for (const method of METHODS) {
      for (const name of ['Ada\u007fLovelace', '\u007f']) {
        await t.test(`${method} ${JSON.stringify(name)}`, async () => {
          const body = jsonText(method, { name: JSON.stringify(name) })
          await assertRefused(s, () => send(s, method, user, body), [
            { pointer: '/name', code: 'invalid_characters' },
          ])
        })
      }
    }
  })

  it('refuses a name of only white space and zero-width characters', async (t) => {
    const [s, user] = await startWithUser(t)
    const names = ['\u200b', '\u200d\u2060', '\u3164', '\u00ad', '\u200b \u200b', '\u3000\u200b']
    for (const method of METHODS) {
      for (const name of names) {
        await t.test(`${method} ${JSON.stringify(name)}`, async () => {
          const body = jsonText(method, { name: JSON.stringify(name) })
          const res = await assertUnchangedBy(s, () => send(s, method, user, body))
          assertFieldErrors(res, [{ pointer: '/name', code: 'invalid_characters' }])
          const message = assertProblem(res, 422).errors?.[0]?.message ?? ''
          assert.match(message, /nothing visible/)
        })
      }
    }
  })

  it('refuses an email whose local part or a domain label is only invisible', async (t) => {
    const [s, user] = await startWithUser(t)
    const emails = ['\u200b@example.com', 'a@\u200b.example.com', 'a@example.\u2060', '\u00ad@b.co']
    for (const method of METHODS) {
      for (const email of emails) {
        await t.test(`${method} ${JSON.stringify(email)}`, async () => {
          const body = jsonText(method, { email: JSON.stringify(email) })
          await assertRefused(s, () => send(s, method, user, body), [
            { pointer: '/email', code: 'invalid_format' },
          ])
        })
      }
    }
  })

  it('stores a name with a zero-width joiner between visible characters', async (t) => {
    const [s, user] = await startWithUser(t)
    const name = '👨\u200d👩\u200d👧 \u0915\u094d\u200d\u0937'
    const res = await send(s, 'PATCH', user, JSON.stringify({ name }))
    assert.equal(res.status, 200, res.text)
    assert.equal(res.json<User>().name, name)
    assert.equal((await s.getUser(user.id)).name, name)
  })
})

describe('bodies with many errors', () => {
  // 7,000 keys of at most five bytes ("!5ef"), each refused as invalid_key: about 62 KB.
  const keys = Array.from({ length: 7000 }, (_, i) => `!${i.toString(36)}`)
  const metadata = `{${keys.map((key) => `"${key}":0`).join(',')}}`

  it('answers 7,000 bad metadata keys with the first 20 errors in a small 422', async (t) => {
    const [s, user] = await startWithUser(t)
    for (const method of METHODS) {
      await t.test(method, async () => {
        const body = jsonText(method, { metadata })
        assert.ok(body.length > 60_000 && body.length < 64 * 1024, `a body of ${body.length} bytes`)
        const res = await assertUnchangedBy(s, () => send(s, method, user, body))
        const first = keys
          .slice(0, 20)
          .map((key) => ({ pointer: `/metadata/${key}`, code: 'invalid_key' }))
        assertFieldErrors(res, first)
        const problem = assertProblem(res, 422, 'validation_failed')
        const pointers = problem.errors?.map((error) => error.pointer)
        assert.deepEqual(
          pointers,
          first.map((error) => error.pointer),
          'in body order',
        )
        assert.ok(problem.detail.length < 200, problem.detail)
        const named = ': /metadata/!0, /metadata/!1, /metadata/!2 and 17 more fields.'
        assert.ok(problem.detail.includes(named), problem.detail)
        const size = Buffer.byteLength(res.text)
        assert.ok(size < 8 * 1024, `a 422 of ${size} bytes`)
      })
    }
  })

  it('sends a 10 KB unknown field name once, in its pointer, and a short detail', async (t) => {
    const [s, user] = await startWithUser(t)
    const key = 'k'.repeat(10 * 1024)
    for (const method of METHODS) {
      await t.test(method, async () => {
        const body = jsonText(method, { [key]: '1' })
        const res = await assertUnchangedBy(s, () => send(s, method, user, body))
        assertFieldErrors(res, [{ pointer: `/${key}`, code: 'unknown_field' }])
        const problem = assertProblem(res, 422)
        assert.ok(problem.detail.length < 100, problem.detail)
        assert.equal(res.text.split(key).length, 2, 'the key appears exactly once')
        assert.ok(Buffer.byteLength(res.text) < key.length + 1024)
      })
    }
  })
})
