import assert from 'node:assert/strict'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import { assertProblem } from '../helpers/http.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES, sql } from '../helpers/postgres.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { makeUser, toContractJson } from '../helpers/store-users.js'
import { makeToken } from '../helpers/tokens.js'

/**
 * Versions and the feed (docs/api.md): a user goes up to 2^53 - 2, the last version is its
 * deletion's, so that every user can be deleted and no event carries a version past 2^53 - 1.
 */

interface FeedEvent {
  readonly type: string
  readonly userId: string
  readonly version: number
}

interface StoreUnderTest {
  readonly name: string
  readonly skip: string | false
  start(t: TestContext): Promise<TestService>
  /** Sets a stored user's version behind the service's back, as an earlier release could have. */
  seedVersion?(t: TestContext, app: TestService, user: User, version: number): Promise<TestService>
}

const MERGE_PATCH = 'application/merge-patch+json'
/** Written out rather than imported, so that the test holds the code to these numbers. */
const MAX_VERSION = 2 ** 53 - 1
const MAX_USER_VERSION = MAX_VERSION - 1
const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })
const schemas = new WeakMap<TestService, string>()

const STORES: readonly StoreUnderTest[] = [
  {
    name: 'memory store',
    skip: false,
    start: (t) => startService(t, { store: new MemoryStore() }),
  },
  {
    name: 'file store',
    skip: false,
    start: (t) => startService(t),
    async seedVersion(t, app, user, version) {
      // A clean stop checkpoints: the user file is what the next start reads. A file edited in
      // place while stopped needs the snapshot removed (docs/operations.md, the users snapshot).
      await app.service.close()
      rmSync(path.join(app.dataDir, 'snapshot'))
      const file = path.join(app.dataDir, 'users', `${user.id}.json`)
      const text = readFileSync(file, 'utf8')
      writeFileSync(file, text.replace(`"version":${user.version}}`, `"version":${version}}`))
      return startService(t, { dataDir: app.dataDir })
    },
  },
  {
    name: 'PostgreSQL',
    skip: SKIP_POSTGRES,
    async start(t) {
      const schema = freshSchema(t)
      const app = await startService(t, {
        store: new PostgresStore({ url: requireDatabaseUrl(), schema }),
      })
      schemas.set(app, schema)
      return app
    },
    async seedVersion(_t, app, user, version) {
      await sql(`UPDATE ${schemas.get(app)}.users SET version = $1 WHERE id = $2`, [
        version,
        user.id,
      ])
      return app
    },
  },
]

async function importLines(app: TestService, lines: readonly string[]): Promise<unknown[]> {
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
    .map((line) => JSON.parse(line) as unknown)
}

async function feedOf(app: TestService, userId: string): Promise<FeedEvent[]> {
  const res = await app.call('GET', `/events?userId=${userId}`, { token: reader })
  assert.equal(res.status, 200, res.text)
  return res.json<{ items: FeedEvent[] }>().items
}

for (const on of STORES) {
  describe(`the last version (${on.name})`, { skip: on.skip }, () => {
    it('refuses an import at 2^53 - 1 naming /version, and every change of a user at 2^53 - 2 with 409 version_exhausted', async (t) => {
      const app = await on.start(t)
      const last = makeUser({ email: uniqueEmail('last'), version: MAX_VERSION })
      const top = makeUser({
        email: uniqueEmail('top'),
        status: 'active',
        version: MAX_USER_VERSION,
      })
      const results = await importLines(app, [toContractJson(last), toContractJson(top)])
      assert.deepEqual(results, [
        {
          line: 1,
          status: 422,
          code: 'validation_failed',
          detail: 'The request breaks the rules of: /version.',
          errors: [
            {
              pointer: '/version',
              code: 'out_of_range',
              message: `version must be a whole number from 1 to ${MAX_USER_VERSION}.`,
            },
          ],
        },
        { line: 2, status: 201, id: top.id },
      ])
      assert.deepEqual(await app.snapshot(), [top])
      const before = await app.call('GET', `/users/${top.id}`)
      assert.equal(before.headers.get('etag'), '"v9007199254740990"')
      const refusals = [
        app.call('PATCH', `/users/${top.id}`, {
          json: { name: 'Changed' },
          contentType: MERGE_PATCH,
        }),
        app.call('PUT', `/users/${top.id}`, { json: { email: uniqueEmail(), name: 'Replaced' } }),
        app.call('POST', `/users/${top.id}:suspend`),
      ]
      for (const res of await Promise.all(refusals)) {
        const problem = assertProblem(res, 409, 'version_exhausted')
        assert.equal(res.headers.get('cache-control'), 'no-store')
        assert.match(problem.detail ?? '', /only be deleted/)
      }
      // Activating an active user changes nothing: no change past the top, a plain 200.
      const same = await app.call('POST', `/users/${top.id}:activate`)
      assert.equal(same.status, 200)
      assert.equal(same.text, before.text)
      const after = await app.call('GET', `/users/${top.id}`)
      assert.equal(after.text, before.text)
      assert.equal(after.headers.get('etag'), '"v9007199254740990"')
      assert.deepEqual(
        (await feedOf(app, top.id)).map((event) => [event.type, event.version]),
        [['user.created', MAX_USER_VERSION]],
      )
    })

    it('refuses an imported version past 2^53 - 2 with one 422 naming /version, also for a stored id', async (t) => {
      const app = await on.start(t)
      const stored = makeUser({ email: uniqueEmail('stored') })
      assert.deepEqual(await importLines(app, [toContractJson(stored)]), [
        { line: 1, status: 201, id: stored.id },
      ])
      const outOfRange = {
        pointer: '/version',
        code: 'out_of_range',
        message: `version must be a whole number from 1 to ${MAX_USER_VERSION}.`,
      }
      const refused = (line: number): unknown => ({
        line,
        status: 422,
        code: 'validation_failed',
        detail: 'The request breaks the rules of: /version.',
        errors: [outOfRange],
      })
      const fresh = makeUser({ email: uniqueEmail('fresh') })
      const results = await importLines(app, [
        // The stored id with a version past the top: the line breaks a rule (422) before the
        // store is asked whether the id holds another user (409).
        toContractJson({ ...stored, version: MAX_VERSION }),
        // 2^53 is no safe integer: the same rule, not "at least 1".
        toContractJson({ ...fresh, version: 2 ** 53 }),
      ])
      assert.deepEqual(results, [refused(1), refused(2)])
      assert.deepEqual(await app.snapshot(), [stored])
    })

    it('deletes a user at 2^53 - 2 with a user.deleted event at 2^53 - 1, never past it', async (t) => {
      const app = await on.start(t)
      const top = makeUser({ email: uniqueEmail('top'), version: MAX_USER_VERSION })
      assert.deepEqual(await importLines(app, [toContractJson(top)]), [
        { line: 1, status: 201, id: top.id },
      ])
      const deleted = await app.call('DELETE', `/users/${top.id}`, {
        headers: { 'if-match': '"v9007199254740990"' },
      })
      assert.equal(deleted.status, 204, deleted.text)
      assertProblem(await app.call('GET', `/users/${top.id}`), 404, 'not_found')
      const events = await feedOf(app, top.id)
      assert.deepEqual(
        events.map((event) => [event.type, event.version]),
        [
          ['user.created', MAX_USER_VERSION],
          ['user.deleted', MAX_VERSION],
        ],
      )
      assert.ok(events.every((event) => Number.isSafeInteger(event.version)))
    })

    const { seedVersion } = on
    if (seedVersion !== undefined) {
      it('deletes a user an earlier release left at 2^53 - 1, its event keeping that version', async (t) => {
        const first = await on.start(t)
        const old = makeUser({ email: uniqueEmail('old'), version: MAX_USER_VERSION })
        assert.deepEqual(await importLines(first, [toContractJson(old)]), [
          { line: 1, status: 201, id: old.id },
        ])
        const app = await seedVersion(t, first, old, MAX_VERSION)
        const read = await app.call('GET', `/users/${old.id}`)
        assert.equal(read.headers.get('etag'), '"v9007199254740991"')
        assertProblem(await app.call('POST', `/users/${old.id}:activate`), 409, 'version_exhausted')
        assert.equal((await app.call('GET', `/users/${old.id}`)).text, read.text)
        assert.equal((await app.call('DELETE', `/users/${old.id}`)).status, 204)
        assert.deepEqual(
          (await feedOf(app, old.id)).map((event) => [event.type, event.version]),
          [
            ['user.created', MAX_USER_VERSION],
            ['user.deleted', MAX_VERSION],
          ],
        )
      })
    }
  })
}
