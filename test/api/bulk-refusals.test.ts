import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import { assertProblem } from '../helpers/http.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../helpers/postgres.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { makeUser, toContractJson } from '../helpers/store-users.js'

/**
 * What the export and the import refuse (docs/bulk.md): a query parameter they do not take, and
 * an exported user whose time stamps or id could not have come from this service.
 */

interface StoreUnderTest {
  readonly name: string
  readonly skip: string | false
  start(t: TestContext): Promise<TestService>
}

const STORES: readonly StoreUnderTest[] = [
  {
    name: 'memory store',
    skip: false,
    start: (t) => startService(t, { store: new MemoryStore() }),
  },
  { name: 'file store', skip: false, start: (t) => startService(t) },
  {
    name: 'PostgreSQL',
    skip: SKIP_POSTGRES,
    start: (t) =>
      startService(t, {
        store: new PostgresStore({ url: requireDatabaseUrl(), schema: freshSchema(t) }),
      }),
  },
]

/** One import of these lines through fetch; the NDJSON results. */
async function importLines(
  app: TestService,
  lines: readonly string[],
): Promise<Record<string, unknown>[]> {
  const res = await fetch(`${app.baseUrl}/users:import`, {
    method: 'POST',
    body: `${lines.join('\n')}\n`,
    headers: { authorization: `Bearer ${app.token}`, 'content-type': 'application/x-ndjson' },
  })
  const text = await res.text()
  assert.equal(res.status, 200, text)
  assert.equal(res.headers.get('content-type'), 'application/x-ndjson')
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

/** An exported user's line with some fields replaced as JSON text. */
function exportedLine(fields: Partial<Record<keyof User, unknown>>): string {
  const user = makeUser({ email: uniqueEmail('imported') })
  return JSON.stringify({ ...(JSON.parse(toContractJson(user)) as object), ...fields })
}

/** A UUIDv7 text for these milliseconds (random bits fixed: the test needs only its shape). */
function uuid7At(ms: number): string {
  const hex = ms.toString(16).padStart(12, '0')
  return `${hex.slice(0, 8)}-${hex.slice(8)}-7abc-8def-0123456789ab`
}

function pointersOf(result: Record<string, unknown> | undefined): string[] {
  return ((result?.['errors'] as { pointer: string }[] | undefined) ?? []).map((e) => e.pointer)
}

for (const on of STORES) {
  describe(`bulk refusals (${on.name})`, { skip: on.skip }, () => {
    it('answers 400 naming a query parameter of the import, importing nothing, and takes the next import', async (t) => {
      const app = await on.start(t)
      await app.createUser()
      const before = await app.snapshot()
      const body = `${JSON.stringify({ email: uniqueEmail('dry'), name: 'Dry Run' })}\n`
      for (const [query, named] of [
        ['dryRun=1', 'dryRun'],
        ['dry%52un=true', 'dryRun'],
        ['validate', 'validate'],
        ['limit=10&dryRun=1', 'limit'],
        ['=1', 'with an empty name'],
      ] as const) {
        const res = await app.call('POST', `/users:import?${query}`, {
          body,
          contentType: 'application/x-ndjson',
        })
        const problem = assertProblem(res, 400, 'bad_request')
        assert.equal(
          problem.detail,
          `The query parameter ${named} is not a parameter of the import, which takes none.`,
        )
        assert.equal(res.headers.get('cache-control'), 'no-store')
        assert.deepEqual(await app.snapshot(), before, query)
      }
      // The refusal held no import lock: the same body without a query imports.
      const [result] = await importLines(app, [body.trim()])
      assert.equal(result?.['status'], 201)
      assert.equal((await app.snapshot()).length, before.length + 1)
    })

    it('answers 400 naming a query parameter of the export, GET and HEAD alike', async (t) => {
      const app = await on.start(t)
      await app.createUser()
      for (const [query, named] of [
        ['cursor=abc', 'cursor'],
        ['limit=1', 'limit'],
        ['format', 'format'],
      ] as const) {
        const res = await app.call('GET', `/users:export?${query}`)
        const problem = assertProblem(res, 400, 'bad_request')
        assert.equal(
          problem.detail,
          `The query parameter ${named} is not a parameter of the export, which takes none.`,
        )
        assert.equal((await app.call('HEAD', `/users:export?${query}`)).status, 400)
      }
      const whole = await app.call('GET', '/users:export')
      assert.equal(whole.status, 200)
      assert.equal(whole.text.split('\n').filter((line) => line !== '').length, 1)
    })

    it('refuses instants that do not exist, updatedAt before createdAt and ids that are not UUIDv7s, each a 422 naming the field', async (t) => {
      const app = await on.start(t)
      await app.createUser()
      const before = await app.snapshot()
      const feb30 = Date.parse('2026-03-02T10:00:00.000Z')
      const midnight = Date.parse('2026-01-02T00:00:00.000Z')
      const good = makeUser({ email: uniqueEmail('good') })
      const lines = [
        // Date.parse reads these as 2026-03-02T10:00 and 2026-01-02T00:00.
        exportedLine({
          id: uuid7At(feb30),
          createdAt: '2026-02-30T10:00:00.000Z',
          updatedAt: '2026-03-02T10:00:00.000Z',
        }),
        exportedLine({
          id: uuid7At(midnight),
          createdAt: '2026-01-02T00:00:00.000Z',
          updatedAt: '2026-01-01T24:00:00.000Z',
        }),
        exportedLine({
          id: uuid7At(Date.parse('2025-02-01T00:00:00.000Z')),
          createdAt: '2025-02-01T00:00:00.000Z',
          updatedAt: '2025-02-29T00:00:00.000Z',
        }),
        exportedLine({
          id: uuid7At(Date.parse('2026-01-02T00:00:00.000Z')),
          createdAt: '2026-01-02T00:00:00.000Z',
          updatedAt: '2026-01-01T23:59:59.999Z',
        }),
        exportedLine({ id: '00000000-0000-0000-0000-000000000000' }),
        // A version 4 UUID, and a v7 with the wrong variant.
        exportedLine({ id: '3f2b8c1e-4d5a-4b6c-9d7e-8f9a0b1c2d3e' }),
        exportedLine({ id: '01900000-0000-7000-c000-000000000000' }),
        // A UUIDv7 whose time is not its createdAt: it would list out of createdAt order.
        exportedLine({
          id: uuid7At(Date.parse('2020-01-01T00:00:00.000Z')),
          createdAt: '2026-01-01T00:00:00.000Z',
          updatedAt: '2026-01-01T00:00:00.000Z',
        }),
        toContractJson(good),
      ]
      const results = await importLines(app, lines)
      assert.deepEqual(
        results.map((result) => [result['line'], result['status'], result['code']]),
        [
          [1, 422, 'validation_failed'],
          [2, 422, 'validation_failed'],
          [3, 422, 'validation_failed'],
          [4, 422, 'validation_failed'],
          [5, 422, 'validation_failed'],
          [6, 422, 'validation_failed'],
          [7, 422, 'validation_failed'],
          [8, 422, 'validation_failed'],
          [9, 201, undefined],
        ],
      )
      assert.deepEqual(results.slice(0, 8).map(pointersOf), [
        ['/createdAt'],
        ['/updatedAt'],
        ['/updatedAt'],
        ['/updatedAt'],
        ['/id'],
        ['/id'],
        ['/id'],
        ['/createdAt'],
      ])
      assert.deepEqual(
        (results[3]?.['errors'] as { message: string }[] | undefined)?.map((e) => e.message),
        ['updatedAt must not be before createdAt.'],
      )
      // Only the good line was stored, as it was; the list by createdAt is in createdAt order.
      assert.deepEqual(
        await app.snapshot(),
        [...before, good].sort((a, b) => (a.id < b.id ? -1 : 1)),
      )
      const listed = (await app.call('GET', '/users?sort=createdAt')).json<{ items: User[] }>()
      const stamps = listed.items.map((user) => user.createdAt)
      assert.deepEqual(stamps, [...stamps].sort())
    })
  })
}
