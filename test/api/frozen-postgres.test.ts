import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import { sleep } from '../helpers/child.js'
import { startFreezableProxy } from '../helpers/freezable-proxy.js'
import { assertProblem, type TestResponse } from '../helpers/http.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES, sql } from '../helpers/postgres.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'

const STATEMENT_TIMEOUT_MS = 1000
/** The driver's own time-out (the statement time-out plus its margin) and room for a busy machine. */
const ANSWER_WITHIN_MS = STATEMENT_TIMEOUT_MS + 1000 + 1500
/** The probe's interval (1 s), its own time-out (2 s) and room for a busy machine. */
const UNREADY_WITHIN_MS = 1000 + 2000 + 1500

/** The answer, or a failure saying how long it did not come. */
async function within(ms: number, what: string, pending: Promise<TestResponse>) {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([pending, late])
  } finally {
    clearTimeout(timer)
  }
}

async function waitForReadiness(s: TestService, status: number, ms: number): Promise<number> {
  const start = Date.now()
  for (;;) {
    const ready = await within(ms, 'GET /readyz', s.call('GET', `${s.url}/readyz`))
    if (ready.status === status) return Date.now() - start
    assert.ok(Date.now() - start < ms, `/readyz still ${ready.status} after ${ms} ms`)
    await sleep(50)
  }
}

async function countEmail(schema: string, email: string): Promise<number> {
  const found = await sql(`SELECT count(*)::int AS n FROM ${schema}.users WHERE email = $1`, [
    email,
  ])
  return (found.rows[0] as { n: number }).n
}

function assertUnavailable(res: TestResponse): void {
  const problem = assertProblem(res, 503, 'storage_unavailable')
  assert.match(res.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/)
  // Refused before its COMMIT was sent: nothing changed, and the answer says so.
  assert.equal(problem.outcome, undefined)
}

/** A service on its own schema, reached through a proxy that can freeze, with warm connections. */
async function frozenWorld(t: TestContext, databaseStatementTimeoutMs?: number) {
  const proxy = await startFreezableProxy(t, requireDatabaseUrl())
  const schema = freshSchema(t)
  const store = new PostgresStore({
    url: proxy.url,
    schema,
    ...(databaseStatementTimeoutMs === undefined ? {} : { databaseStatementTimeoutMs }),
  })
  t.after(() => store.close())
  const s = await startService(t, { store })
  await s.createUser()
  // Several connections in the pool, as a service under load has: the requests below take
  // connections that were open when the database stopped answering.
  await Promise.all([1, 2, 3, 4].map(() => s.call('GET', '/users')))
  await waitForReadiness(s, 200, 10_000)
  return { proxy, schema, s }
}

describe('a PostgreSQL database that stops answering without closing its connections', {
  skip: SKIP_POSTGRES,
}, () => {
  it('answers 503 storage_unavailable within the time-out, turns /readyz 503, writes nothing, and recovers when it answers again', {
    timeout: 60_000,
  }, async (t) => {
    const { proxy, schema, s } = await frozenWorld(t, STATEMENT_TIMEOUT_MS)
    proxy.freeze()
    const email = uniqueEmail('frozen')
    const start = Date.now()
    const [list, create] = await Promise.all([
      within(ANSWER_WITHIN_MS, 'GET /users', s.call('GET', '/users')),
      within(
        ANSWER_WITHIN_MS,
        'POST /users',
        s.call('POST', '/users', { json: { email, name: 'Never Written' } }),
      ),
    ])
    assertUnavailable(list)
    assertUnavailable(create)
    assert.ok(Date.now() - start < ANSWER_WITHIN_MS)
    await waitForReadiness(s, 503, UNREADY_WITHIN_MS)

    proxy.thaw()
    await waitForReadiness(s, 200, 15_000)
    assert.equal(await countEmail(schema, email), 0, 'the refused POST wrote something')
    const again = await s.call('POST', '/users', { json: { email, name: 'Written Later' } })
    assert.equal(again.status, 201, again.text)
    assert.equal(await countEmail(schema, email), 1)
  })

  it('turns /readyz 503 by its probe alone, long before the statement time-out, and 200 again', {
    timeout: 60_000,
  }, async (t) => {
    // The default statement time-out (30 s): nothing but the probe's own time-out can be seen.
    const { proxy, s } = await frozenWorld(t)
    proxy.freeze()
    const unready = await waitForReadiness(s, 503, UNREADY_WITHIN_MS)
    assert.ok(unready < UNREADY_WITHIN_MS, `/readyz turned 503 after ${unready} ms`)
    proxy.thaw()
    await waitForReadiness(s, 200, 15_000)
    assert.equal((await s.call('GET', '/users')).status, 200)
  })

  it('turns /readyz 503 as soon when statements in flight hold every connection of the pool', {
    timeout: 60_000,
  }, async (t) => {
    // A replica at work: the statements in flight when the database froze keep the pool's
    // connections (10), so the probe finds none idle. It waited for one, or for a new connection
    // to the frozen server, up to the 5 s connection time-out before its own 2 s counted.
    const { proxy, s } = await frozenWorld(t)
    proxy.freeze()
    const hung = Array.from({ length: 12 }, () => s.call('GET', '/users').catch(() => undefined))
    const unready = await waitForReadiness(s, 503, UNREADY_WITHIN_MS)
    assert.ok(unready < UNREADY_WITHIN_MS, `/readyz turned 503 after ${unready} ms`)
    proxy.thaw()
    await Promise.all(hung)
    await waitForReadiness(s, 200, 15_000)
  })
})
