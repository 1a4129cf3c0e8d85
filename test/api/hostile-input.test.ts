import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import { MAX_USER_VERSION, MAX_VERSION } from '../../src/users/user-fields.js'
import { assertProblem, assertValidation, request, type TestResponse } from '../helpers/http.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../helpers/postgres.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { makeUser, toContractJson } from '../helpers/store-users.js'
import { makeToken, nowSeconds, signJwt } from '../helpers/tokens.js'

/**
 * §9: input a store cannot take (a NUL, a number out of range) is the client's fault, answered
 * alike on every store with the parameter or field named, and never counts against readiness.
 */

interface StoreUnderTest {
  readonly name: string
  readonly skip: string | false
  start(t: TestContext): Promise<TestService>
}

const ON_FILES: StoreUnderTest = { name: 'file store', skip: false, start: (t) => startService(t) }
const ON_POSTGRES: StoreUnderTest = {
  name: 'PostgreSQL',
  skip: SKIP_POSTGRES,
  // Probed every 100 ms: a dip in readiness would show in a 50 ms sample.
  start: (t) =>
    startService(t, {
      store: new PostgresStore({
        url: requireDatabaseUrl(),
        schema: freshSchema(t),
        probeIntervalMs: 100,
      }),
    }),
}

const MERGE_PATCH = 'application/merge-patch+json'

/** Runs `work` while /readyz is asked every 50 ms; returns every status it answered. */
async function sampleReadiness(app: TestService, work: () => Promise<void>): Promise<number[]> {
  const statuses: number[] = []
  let done = false
  const sampling = (async () => {
    while (!done) {
      statuses.push((await request('GET', `${app.url}/readyz`)).status)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  })()
  try {
    await work()
  } finally {
    done = true
    await sampling
  }
  return statuses
}

/** Sends `send` twice a second for two seconds. */
async function twiceASecond(send: () => Promise<void>): Promise<number> {
  let sent = 0
  for (const deadline = Date.now() + 2000; Date.now() < deadline; sent += 1) {
    await Promise.all([send(), new Promise((resolve) => setTimeout(resolve, 500))])
  }
  return sent
}

/** One import body of these lines; the results by line. */
async function importLines(
  app: TestService,
  lines: readonly string[],
): Promise<Record<string, unknown>[]> {
  // fetch itself: the helper would parse the NDJSON answer as one JSON text.
  const res = await fetch(`${app.baseUrl}/users:import`, {
    method: 'POST',
    body: `${lines.join('\n')}\n`,
    headers: { authorization: `Bearer ${app.token}`, 'content-type': 'application/x-ndjson' },
  })
  const text = await res.text()
  assert.equal(res.status, 200, text)
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

function exported(fields: Partial<User>): { user: User; line: string } {
  const user = makeUser({ email: uniqueEmail('imported'), ...fields })
  return { user, line: toContractJson(user) }
}

function nulNamed(res: TestResponse, parameter: string): void {
  const problem = assertProblem(res, 400, 'bad_request')
  assert.equal(
    problem.detail,
    `The query parameter ${parameter} must not contain a NUL character (U+0000).`,
  )
}

function describeHostileInput(on: StoreUnderTest): void {
  describe(`hostile input (${on.name})`, { skip: on.skip }, () => {
    it('refuses a NUL in any list parameter with 400 naming it, changing nothing', async (t) => {
      const app = await on.start(t)
      await app.createUser({ email: 'ada@example.com', name: 'Ada' })
      const before = await app.snapshot()
      const reader = makeToken({ scope: 'users:read' })
      for (const [query, parameter] of [
        ['q=a%00b', 'q'],
        ['email=a%00b@x.io', 'email'],
        ['q=%00', 'q'],
        ['status=active%00', 'status'],
        ['sort=createdAt%00', 'sort'],
        ['cursor=abc%00def', 'cursor'],
        ['limit=1%00', 'limit'],
        ['status=active&email=ada@example.com%00', 'email'],
      ] as const) {
        nulNamed(await app.call('GET', `/users?${query}`, { token: reader }), parameter)
      }
      assert.deepEqual(await app.snapshot(), before)
    })

    it('keeps /readyz at 200 while NUL queries arrive twice a second', async (t) => {
      const app = await on.start(t)
      await app.createUser()
      const before = await app.snapshot()
      const reader = makeToken({ scope: 'users:read' })
      const answers: TestResponse[] = []
      const statuses = await sampleReadiness(app, async () => {
        await twiceASecond(async () => {
          answers.push(await app.call('GET', '/users?q=a%00b', { token: reader }))
          answers.push(await app.call('GET', '/users?email=a%00b@x.io', { token: reader }))
        })
      })
      assert.ok(
        // Probes every 50 ms plus their own time: 40 on an idle machine, fewer on a loaded one.
        answers.length >= 8 && statuses.length >= 10,
        `${answers.length} bad requests, ${statuses.length} probes`,
      )
      // Readiness first: it is what the load balancer sees.
      assert.deepEqual(
        statuses.filter((status) => status !== 200),
        [],
        `/readyz answered ${statuses.join(' ')}`,
      )
      for (const [i, res] of answers.entries()) nulNamed(res, i % 2 === 0 ? 'q' : 'email')
      assert.deepEqual(await app.snapshot(), before)
    })

    it('answers 401 token_invalid to a token whose sub holds a NUL, a control character or a lone surrogate, writing nothing', async (t) => {
      const app = await on.start(t)
      const user = await app.createUser()
      const before = await app.snapshot()
      const now = nowSeconds()
      for (const sub of [
        'tok\u0000en',
        '\u0000',
        'line\nbreak',
        'del\u007F',
        'c1\u0085',
        'half\uD800',
      ]) {
        const token = signJwt({
          sub,
          iat: now,
          exp: now + 300,
          scope: 'users:read users:write users:admin',
        })
        const answers = [
          await app.call('POST', '/users', {
            token,
            json: { email: uniqueEmail(), name: 'Never' },
          }),
          await app.call('PATCH', `/users/${user.id}`, {
            token,
            json: { name: 'Never' },
            contentType: MERGE_PATCH,
          }),
          await app.call('POST', '/users:import', {
            token,
            body: `${JSON.stringify({ email: uniqueEmail(), name: 'Never' })}\n`,
            contentType: 'application/x-ndjson',
          }),
          await app.call('GET', '/users', { token }),
        ]
        for (const res of answers) {
          assertProblem(res, 401, 'token_invalid')
          assert.equal(
            res.headers.get('www-authenticate'),
            'Bearer realm="users", error="invalid_token", error_description="The token is not valid."',
            JSON.stringify(sub),
          )
        }
      }
      assert.deepEqual(await app.snapshot(), before)
      // A printable subject, however odd, is fine.
      const odd = signJwt({ sub: 'svc:import ✓ 𝒳', iat: now, exp: now + 300, scope: 'users:write' })
      assert.equal(
        (
          await app.call('POST', '/users', {
            token: odd,
            json: { email: uniqueEmail(), name: 'Fine' },
          })
        ).status,
        201,
      )
    })

    it("refuses a NUL in a body's email or name with 422 naming the field, and keeps one inside a metadata value", async (t) => {
      const app = await on.start(t)
      const user = await app.createUser({ email: 'ada@example.com', name: 'Ada' })
      const before = await app.snapshot()
      const email = assertValidation(
        await app.call('POST', '/users', { json: { email: 'a\u0000b@example.com', name: 'Ada' } }),
        ['/email'],
      )
      assert.deepEqual(
        email.errors?.map((error) => [error.pointer, error.code]),
        [['/email', 'invalid_format']],
      )
      const name = assertValidation(
        await app.call('POST', '/users', {
          json: { email: uniqueEmail(), name: 'Ada\u0000Lovelace' },
        }),
        ['/name'],
      )
      assert.deepEqual(
        name.errors?.map((error) => [error.pointer, error.code]),
        [['/name', 'invalid_characters']],
      )
      for (const body of [{ email: 'x\u0000@example.com' }, { name: '\u0000' }]) {
        const res = await app.call('PATCH', `/users/${user.id}`, {
          json: body,
          contentType: MERGE_PATCH,
        })
        assertValidation(
          res,
          Object.keys(body).map((key) => `/${key}`),
        )
      }
      const line = JSON.stringify({ email: uniqueEmail(), name: 'Nul\u0000Name' })
      const [result] = await importLines(app, [line])
      assert.deepEqual(
        [
          result?.['status'],
          result?.['code'],
          (result?.['errors'] as { pointer: string }[] | undefined)?.map((error) => error.pointer),
        ],
        [422, 'validation_failed', ['/name']],
      )
      assert.deepEqual(await app.snapshot(), before)
      const created = await app.createUser({ metadata: { note: 'a\u0000b' } })
      assert.equal(created.metadata['note'], 'a\u0000b')
      assert.equal((await app.getUser(created.id)).metadata['note'], 'a\u0000b')
    })

    it('imports versions past 32 bits up to 2^53 - 2, refuses others with 422 naming /version, and stays ready', async (t) => {
      const app = await on.start(t)
      await app.createUser()
      const before = await app.snapshot()
      const wide = exported({ version: 2 ** 31 })
      const top = exported({ version: MAX_USER_VERSION })
      const lines = [
        wide.line,
        top.line,
        exported({ version: 0 }).line,
        // The last version is kept for the user's deletion.
        exported({ version: MAX_VERSION }).line,
        // JSON text: 2^53 and 2^63 read as numbers no client holds exactly.
        toContractJson(makeUser({ email: uniqueEmail() })).replace(
          /"version":1}$/,
          '"version":9007199254740992}',
        ),
        toContractJson(makeUser({ email: uniqueEmail() })).replace(
          /"version":1}$/,
          '"version":9223372036854775808}',
        ),
        exported({ version: 1.5 }).line,
      ]
      let results: Record<string, unknown>[] = []
      const statuses = await sampleReadiness(app, async () => {
        results = await importLines(app, lines)
        await new Promise((resolve) => setTimeout(resolve, 300))
      })
      assert.deepEqual(
        statuses.filter((status) => status !== 200),
        [],
        `/readyz answered ${statuses.join(' ')}`,
      )
      assert.deepEqual(
        results.map((result) => [result['line'], result['status']]),
        [
          [1, 201],
          [2, 201],
          [3, 422],
          [4, 422],
          [5, 422],
          [6, 422],
          [7, 422],
        ],
      )
      for (const result of results.slice(2)) {
        assert.deepEqual(
          (result['errors'] as { pointer: string }[]).map((error) => error.pointer),
          ['/version'],
        )
      }
      assert.equal((await request('GET', `${app.url}/readyz`)).status, 200)
      assert.deepEqual(
        await app.snapshot(),
        [...before, wide.user, top.user].sort((a, b) => (a.id < b.id ? -1 : 1)),
      )
      const read = await app.call('GET', `/users/${top.user.id}`)
      assert.equal(read.headers.get('etag'), '"v9007199254740990"')
      assert.ok(read.text.endsWith('"version":9007199254740990}'), read.text)
    })

    it('changes a user past 2^31 - 1, and refuses every change past 2^53 - 2 with 409 version_exhausted, keeping the ETag', async (t) => {
      const app = await on.start(t)
      const edge = exported({ version: 2 ** 31 - 1 })
      const near = exported({ version: MAX_USER_VERSION - 1 })
      const top = exported({ version: MAX_USER_VERSION })
      const results = await importLines(app, [edge.line, near.line, top.line])
      assert.deepEqual(
        results.map((result) => result['status']),
        [201, 201, 201],
      )

      const widened = await app.call('PATCH', `/users/${edge.user.id}`, {
        json: { name: 'Past 32 bits' },
        contentType: MERGE_PATCH,
      })
      assert.equal(widened.status, 200, widened.text)
      assert.equal(widened.json<User>().version, 2 ** 31)
      assert.equal(widened.headers.get('etag'), `"v${2 ** 31}"`)

      const reached = await app.call('PATCH', `/users/${near.user.id}`, {
        json: { name: 'At the top' },
        contentType: MERGE_PATCH,
      })
      assert.equal(reached.status, 200, reached.text)
      assert.equal(reached.headers.get('etag'), '"v9007199254740990"')
      for (const user of [near.user, top.user]) {
        const before = await app.call('GET', `/users/${user.id}`)
        for (let i = 0; i < 3; i += 1) {
          const res = await app.call('PATCH', `/users/${user.id}`, {
            json: { name: `Change ${i}` },
            contentType: MERGE_PATCH,
          })
          assertProblem(res, 409, 'version_exhausted')
        }
        assertProblem(
          await app.call('PUT', `/users/${user.id}`, {
            json: { email: uniqueEmail(), name: 'Replaced' },
          }),
          409,
          'version_exhausted',
        )
        assertProblem(
          await app.call('POST', `/users/${user.id}:activate`),
          409,
          'version_exhausted',
        )
        // The writer holding the previous ETag is told so, never given a 200.
        const stale = await app.call('PATCH', `/users/${user.id}`, {
          json: { name: 'Lost update' },
          contentType: MERGE_PATCH,
          headers: { 'if-match': '"v9007199254740989"' },
        })
        assertProblem(stale, 412, 'precondition_failed')
        const after = await app.call('GET', `/users/${user.id}`)
        assert.equal(after.text, before.text)
        assert.equal(after.headers.get('etag'), '"v9007199254740990"')
        // A change that changes nothing is no change past the top.
        const same = await app.call('PATCH', `/users/${user.id}`, {
          json: { name: after.json<User>().name },
          contentType: MERGE_PATCH,
        })
        assert.equal(same.status, 200)
        assert.equal(same.text, before.text)
      }
      assert.equal((await request('GET', `${app.url}/readyz`)).status, 200)
      assert.equal((await app.call('DELETE', `/users/${top.user.id}`)).status, 204)
      assertProblem(await app.call('GET', `/users/${top.user.id}`), 404, 'not_found')
    })

    it('follows a cursor whose user was deleted meanwhile to the end, every other user once', async (t) => {
      const app = await on.start(t)
      const users: User[] = []
      for (let i = 0; i < 5; i += 1) users.push(await app.createUser())
      const first = await app.call('GET', '/users?limit=2')
      const page = first.json<{ items: User[]; nextCursor: string | null }>()
      assert.deepEqual(
        page.items.map((user) => user.id),
        users.slice(0, 2).map((user) => user.id),
      )
      assert.equal((await app.call('DELETE', `/users/${users[1]?.id ?? ''}`)).status, 204)
      const rest = await app.call('GET', `/users?limit=10&cursor=${page.nextCursor ?? ''}`)
      assert.equal(rest.status, 200)
      const last = rest.json<{ items: User[]; nextCursor: string | null }>()
      assert.deepEqual(
        last.items.map((user) => user.id),
        users.slice(2).map((user) => user.id),
      )
      assert.equal(last.nextCursor, null)
      // A cursor after a user that is then deleted, the last: an empty last page.
      const three = (await app.call('GET', '/users?limit=3')).json<{
        items: User[]
        nextCursor: string | null
      }>()
      assert.deepEqual(
        three.items.map((user) => user.id),
        [users[0], users[2], users[3]].map((user) => user?.id),
      )
      assert.equal((await app.call('DELETE', `/users/${users[4]?.id ?? ''}`)).status, 204)
      const end = await app.call('GET', `/users?cursor=${three.nextCursor ?? ''}`)
      assert.equal(end.status, 200)
      assert.deepEqual(end.json<{ items: User[]; nextCursor: string | null }>(), {
        items: [],
        nextCursor: null,
      })
    })
  })
}

describeHostileInput(ON_FILES)
describeHostileInput(ON_POSTGRES)

describe('the OpenAPI document', () => {
  it("gives the version range of a user: 1 to 2^53 - 2 (the last is its deletion event's)", async (t) => {
    const app = await startService(t)
    const res = await request('GET', `${app.url}/openapi.json`)
    const version = (
      res.body as {
        components: { schemas: { User: { properties: { version: Record<string, unknown> } } } }
      }
    ).components.schemas.User.properties.version
    assert.deepEqual([version['minimum'], version['maximum']], [1, MAX_USER_VERSION])
  })
})
