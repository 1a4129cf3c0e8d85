import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import { ServiceError } from '../../../src/domain/errors.js'
import { formatEventId } from '../../../src/domain/event.js'
import { PostgresStore } from '../../../src/store/postgres/postgres-store.js'
import { SCHEMA_VERSION } from '../../../src/store/postgres/schema.js'
import { sleep } from '../../helpers/child.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES, sql } from '../../helpers/postgres.js'
import { describeWebhookStoreContract } from '../../helpers/webhook-store-suite.js'
import { changeWebhook, makeAttempt, makeWebhook } from '../../helpers/webhook-values.js'

/** A store on `schema` (a fresh one by default), not opened; closed when the test ends. */
function newStore(t: TestContext, schema = freshSchema(t)): PostgresStore {
  const store = new PostgresStore({ url: requireDatabaseUrl(), schema, probeIntervalMs: 100 })
  t.after(() => store.close())
  return store
}

/** Two opened stores on one fresh schema: two replicas of the service. */
async function twoReplicas(t: TestContext): Promise<[PostgresStore, PostgresStore]> {
  const schema = freshSchema(t)
  const a = newStore(t, schema)
  const b = newStore(t, schema)
  await a.open()
  await b.open()
  return [a, b]
}

const ZERO = formatEventId(0)

describe('PostgresStore: webhooks', { skip: SKIP_POSTGRES }, () => {
  describeWebhookStoreContract('PostgresStore', (t) => Promise.resolve(newStore(t)))

  describe('migration 8', () => {
    it('makes the four webhook tables, the endpoint with its secrets in a column', async (t) => {
      const schema = freshSchema(t)
      const store = newStore(t, schema)
      await store.open()
      assert.equal(SCHEMA_VERSION, 8)
      const versions = await sql(`SELECT max(version) AS v FROM ${schema}.user_service_schema`)
      assert.equal(versions.rows[0]?.v, 8)
      const hook = { ...makeWebhook(), previousSecret: 'whsec_b2xk' }
      await store.webhooks.create(hook, formatEventId(4), 20)
      const row = await sql(`SELECT secret, previous_secret, revision FROM ${schema}.webhooks`)
      assert.deepEqual(row.rows, [
        { secret: hook.secret, previous_secret: 'whsec_b2xk', revision: '1' },
      ])
      const cursor = await sql(`SELECT webhook_id, after FROM ${schema}.webhook_cursors`)
      assert.deepEqual(cursor.rows, [{ webhook_id: hook.endpoint.id, after: formatEventId(4) }])
    })

    it('deletes the cursor, the log and the lease with their endpoint', async (t) => {
      const schema = freshSchema(t)
      const store = newStore(t, schema)
      await store.open()
      const hook = makeWebhook()
      const id = hook.endpoint.id
      await store.webhooks.create(hook, ZERO, 20)
      await store.webhooks.logAttempt(id, makeAttempt(1))
      assert.equal(await store.webhooks.lease(id, 'a', 10_000), true)
      await store.webhooks.delete(id)
      const left = await sql(
        `SELECT (SELECT count(*) FROM ${schema}.webhook_cursors)::int AS cursors,
          (SELECT count(*) FROM ${schema}.webhook_attempts)::int AS attempts,
          (SELECT count(*) FROM ${schema}.webhook_leases)::int AS leases`,
      )
      assert.deepEqual(left.rows, [{ cursors: 0, attempts: 0, leases: 0 }])
    })
  })

  describe('two replicas on one schema', () => {
    it('grant the lease of an endpoint to one holder at a time, and to another once it expires', async (t) => {
      const [a, b] = await twoReplicas(t)
      const hook = makeWebhook()
      const id = hook.endpoint.id
      await a.webhooks.create(hook, ZERO, 20)
      // Leases of 2 s: long beside a query even on a loaded machine, short for the test to wait.
      assert.equal(await a.webhooks.lease(id, 'holder-a', 2000), true)
      assert.equal(await b.webhooks.lease(id, 'holder-b', 2000), false)
      // The holder renews it; the other still cannot take it.
      assert.equal(await a.webhooks.lease(id, 'holder-a', 2000), true)
      assert.equal(await b.webhooks.lease(id, 'holder-b', 2000), false)
      await sleep(2200)
      assert.equal(await b.webhooks.lease(id, 'holder-b', 2000), true)
      assert.equal(await a.webhooks.lease(id, 'holder-a', 2000), false)
      // Given back, it is free at once.
      await b.webhooks.releaseLease(id, 'holder-b')
      assert.equal(await a.webhooks.lease(id, 'holder-a', 10_000), true)
    })

    it('grant a lease asked for at once by many holders to exactly one', async (t) => {
      const [a, b] = await twoReplicas(t)
      const hook = makeWebhook()
      await a.webhooks.create(hook, ZERO, 20)
      const asks = Array.from({ length: 10 }, (_, i) =>
        (i % 2 === 0 ? a : b).webhooks.lease(hook.endpoint.id, `holder-${i}`, 10_000),
      )
      assert.equal((await Promise.all(asks)).filter(Boolean).length, 1)
    })

    it('hold the limit across replicas: concurrent creates on both stop at max', async (t) => {
      const [a, b] = await twoReplicas(t)
      const results = await Promise.allSettled(
        Array.from({ length: 12 }, (_, i) =>
          (i % 2 === 0 ? a : b).webhooks.create(makeWebhook(), ZERO, 5),
        ),
      )
      const refused = results.filter((result) => result.status === 'rejected')
      assert.equal(refused.length, 7)
      for (const result of refused) {
        assert.ok(result.reason instanceof ServiceError)
        assert.equal(result.reason.code, 'webhook_limit_reached')
      }
      assert.equal((await a.webhooks.list()).length, 5)
      assert.equal((await b.webhooks.list()).length, 5)
    })

    it('lose no change when both change one endpoint at once: each change sees the one before', async (t) => {
      const [a, b] = await twoReplicas(t)
      const hook = makeWebhook()
      const id = hook.endpoint.id
      await a.webhooks.create(hook, ZERO, 20)
      const change = (current: typeof hook) =>
        changeWebhook(current, { description: `${current.endpoint.description}x` })
      await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).webhooks.update(id, change)),
      )
      const stored = await b.webhooks.get(id)
      assert.equal(stored?.endpoint.version, 21)
      assert.equal(stored?.endpoint.description, 'x'.repeat(20))
    })

    it('see each other’s endpoints, cursors and logs, and refuse an advance from a cursor moved by the other', async (t) => {
      const [a, b] = await twoReplicas(t)
      const hook = makeWebhook()
      const id = hook.endpoint.id
      await a.webhooks.create(hook, formatEventId(1), 20)
      assert.deepEqual(await b.webhooks.get(id), hook)
      assert.equal(await b.webhooks.advanceCursor(id, formatEventId(1), formatEventId(2)), true)
      assert.equal(await a.webhooks.advanceCursor(id, formatEventId(1), formatEventId(3)), false)
      assert.equal(await a.webhooks.cursor(id), formatEventId(2))
      const attempt = makeAttempt(2)
      await a.webhooks.logAttempt(id, attempt)
      assert.deepEqual(await b.webhooks.attempts(id, 5), [attempt])
      await b.webhooks.delete(id)
      assert.equal(await a.webhooks.get(id), undefined)
      // An attempt that ends after its endpoint was deleted is dropped with it.
      await a.webhooks.logAttempt(id, makeAttempt(3))
      assert.deepEqual(await a.webhooks.attempts(id, 5), [])
    })
  })
})
