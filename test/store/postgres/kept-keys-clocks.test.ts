import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { DAY_MS, keyed, keyRows, openOn } from '../../helpers/pg-kept-keys.js'
import { freshSchema, SKIP_POSTGRES } from '../../helpers/postgres.js'
import { changeUser, makeUser } from '../../helpers/store-users.js'

/**
 * How far the odd replica's clock is off: two retentions, so that by its own clock every kept key
 * has expired (a clock ahead) or none has (a clock behind).
 */
const SKEW_MS = 2 * DAY_MS

describe('PostgreSQL kept Idempotency-Keys on replicas whose clocks differ', {
  skip: SKIP_POSTGRES,
}, () => {
  it("a replica whose clock runs ahead finds, keeps and does not sweep another replica's kept keys", async (t) => {
    const schema = freshSchema(t)
    const normal = await openOn(t, schema)
    const ahead = await openOn(t, schema, { now: () => Date.now() + SKEW_MS })
    const created = await normal.create(makeUser(), undefined, {
      idempotency: keyed('admin', 'post'),
    })
    await normal.keys.keepAlone(keyed('admin', 'alone').keep(created))
    assert.equal((await ahead.keys.find('admin', 'post'))?.answer.status, 201)
    assert.equal((await ahead.keys.find('admin', 'alone'))?.answer.status, 201)
    // Its hold of a kept key takes nothing over, and its writes with that key are refused.
    assert.equal(await ahead.keys.hold('admin', 'post'), 'held')
    await assert.rejects(
      ahead.keys.keepAlone(keyed('admin', 'post', 'c'.repeat(64)).keep(undefined)),
      { code: 'idempotency_key_in_use' },
    )
    await assert.rejects(
      ahead.update(created.user.id, (current) => changeUser(current.user, { name: 'Twice' }), {
        idempotency: keyed('admin', 'alone', 'd'.repeat(64)),
      }),
      { code: 'idempotency_key_in_use' },
    )
    await assert.rejects(
      ahead.create(makeUser(), undefined, { idempotency: keyed('admin', 'post') }),
      { code: 'idempotency_key_in_use' },
    )
    assert.equal(await ahead.keys.sweep(), 0)
    assert.deepEqual(await keyRows(schema), [
      { subject: 'admin', key: 'alone', status: 201, holder: null, held: false },
      { subject: 'admin', key: 'post', status: 201, holder: null, held: false },
    ])
    assert.equal((await normal.keys.find('admin', 'post'))?.fingerprint, 'a'.repeat(64))
    assert.equal((await normal.get(created.user.id))?.user.name, created.user.name)
  })
  it('a replica whose clock runs behind replays no key the database clock has expired, and holds it anew', async (t) => {
    const schema = freshSchema(t)
    const normal = await openOn(t, schema)
    const behind = await openOn(t, schema, { now: () => Date.now() - SKEW_MS })
    await normal.keys.keepAlone(
      keyed('admin', 'old', 'a'.repeat(64), Date.now() - 1).keep(undefined),
    )
    assert.equal(await behind.keys.find('admin', 'old'), undefined)
    assert.equal(await behind.keys.hold('admin', 'old'), 'held')
    assert.deepEqual(await keyRows(schema), [
      { subject: 'admin', key: 'old', status: null, holder: behind.keys.holder, held: true },
    ])
    await behind.keys.release('admin', 'old')
    await normal.keys.keepAlone(
      keyed('admin', 'gone', 'a'.repeat(64), Date.now() - 1).keep(undefined),
    )
    assert.equal(await behind.keys.sweep(), 1)
    assert.deepEqual(await keyRows(schema), [])
  })
})
