import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { PostgresStore } from '../../../src/store/postgres/postgres-store.js'
import { eventCount, keyed, keyRows, openOn, waitFor } from '../../helpers/pg-kept-keys.js'
import { freshSchema, SKIP_POSTGRES, sql } from '../../helpers/postgres.js'
import { listAll } from '../../helpers/store-suite.js'
import { makeUser } from '../../helpers/store-users.js'

/** Short leases, so that a dead holder's hold is free in about a second. */
const SHORT = { keyTimings: { holdLeaseMs: 1000, holdRenewMs: 200 } }

describe('PostgreSQL kept Idempotency-Keys on two replicas', { skip: SKIP_POSTGRES }, () => {
  it("refuses a key another replica holds (in_use at once), and frees it with that replica's release", async (t) => {
    const schema = freshSchema(t)
    const a = await openOn(t, schema)
    const b = await openOn(t, schema)
    assert.equal(await a.keys.hold('admin', 'k'), 'held')
    const started = Date.now()
    assert.equal(await b.keys.hold('admin', 'k'), 'in_use')
    assert.ok(Date.now() - started < 1000, 'answered at once')
    // Only its holder's release frees it.
    await b.keys.release('admin', 'k')
    assert.equal(await b.keys.hold('admin', 'k'), 'in_use')
    await a.keys.release('admin', 'k')
    assert.equal(await b.keys.hold('admin', 'k'), 'held')
    assert.deepEqual(await keyRows(schema), [
      { subject: 'admin', key: 'k', status: null, holder: b.keys.holder, held: true },
    ])
  })

  it('keeps a hold past its lease while its holder renews it, and lets another replica take it once the holder stops', async (t) => {
    const schema = freshSchema(t)
    const a = await openOn(t, schema, SHORT)
    const b = await openOn(t, schema, SHORT)
    assert.equal(await a.keys.hold('admin', 'k'), 'held')
    await new Promise((resolve) => setTimeout(resolve, 2500))
    assert.equal(await b.keys.hold('admin', 'k'), 'in_use', 'renewed past two leases')
    // The holder dies without a release: its hold lapses after the lease.
    await a.close()
    const stopped = Date.now()
    await waitFor(
      'the hold to be taken over',
      async () => (await b.keys.hold('admin', 'k')) === 'held',
    )
    const waited = Date.now() - stopped
    // The lease is 1 s; the rest is margin for a loaded machine, far below a default lease (10 s).
    assert.ok(waited < 5000, `taken over after ${waited} ms`)
    assert.deepEqual(await keyRows(schema), [
      { subject: 'admin', key: 'k', status: null, holder: b.keys.holder, held: true },
    ])
  })

  it('leases a hold for 10 s by default', async (t) => {
    const schema = freshSchema(t)
    const a = await openOn(t, schema)
    assert.equal(await a.keys.hold('admin', 'k'), 'held')
    const lease = await sql(
      `SELECT extract(epoch FROM held_until - now())::float8 AS s FROM ${schema}.idempotency_keys`,
    )
    const seconds = Number(lease.rows[0]?.s)
    assert.ok(seconds > 9 && seconds <= 10, `${seconds} s`)
  })

  it('lets one of 50 concurrent keyed creates split across two replicas run: one user, one event, one kept key', async (t) => {
    const schema = freshSchema(t)
    const replicas = [await openOn(t, schema), await openOn(t, schema)]
    // As a request does: hold, then replay a kept key, else run the change with the key.
    const attempt = async (store: PostgresStore): Promise<string> => {
      if ((await store.keys.hold('admin', 'one')) === 'in_use') return 'in_use'
      if ((await store.keys.find('admin', 'one')) !== undefined) return 'replayed'
      try {
        await store.create(makeUser(), undefined, { idempotency: keyed('admin', 'one') })
        return 'created'
      } catch (error) {
        await store.keys.release('admin', 'one')
        return String((error as { code?: unknown }).code)
      }
    }
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) => attempt(replicas[i % 2] as PostgresStore)),
    )
    assert.equal(outcomes.filter((outcome) => outcome === 'created').length, 1, String(outcomes))
    assert.deepEqual(
      outcomes.filter((outcome) => !['created', 'in_use', 'replayed'].includes(outcome)),
      [],
    )
    const users = await listAll(replicas[1] as PostgresStore)
    assert.equal(users.length, 1)
    assert.equal(await eventCount(schema), 1)
    assert.deepEqual(await keyRows(schema), [
      { subject: 'admin', key: 'one', status: 201, holder: null, held: false },
    ])
    const kept = await replicas[0]?.keys.find('admin', 'one')
    assert.equal(kept?.answer.body, users[0]?.json)
  })

  it('makes one change of 50 keyed creates with one key even without holds: the others are refused in use', async (t) => {
    const schema = freshSchema(t)
    const replicas = [await openOn(t, schema), await openOn(t, schema)]
    const outcomes = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) =>
        (replicas[i % 2] as PostgresStore).create(makeUser(), undefined, {
          idempotency: keyed('admin', 'one'),
        }),
      ),
    )
    const made = outcomes.flatMap((outcome) =>
      outcome.status === 'fulfilled' ? [outcome.value.user.id] : [],
    )
    assert.equal(made.length, 1)
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected')
        assert.equal((outcome.reason as { code?: unknown }).code, 'idempotency_key_in_use')
    }
    assert.deepEqual(
      (await listAll(replicas[0] as PostgresStore)).map((record) => record.user.id),
      made,
    )
    assert.equal(await eventCount(schema), 1)
    assert.equal(
      JSON.parse((await replicas[1]?.keys.find('admin', 'one'))?.answer.body ?? '{}').id,
      made[0],
    )
  })
})
