import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import pg from 'pg'

import { MIGRATIONS, SCHEMA_VERSION } from '../../../src/store/postgres/schema.js'
import { eventCount, keyed, openOn, keyRows as rows, waitFor } from '../../helpers/pg-kept-keys.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES, sql } from '../../helpers/postgres.js'
import { listAll } from '../../helpers/store-suite.js'
import { changeUser, makeUser } from '../../helpers/store-users.js'

describe('PostgreSQL kept Idempotency-Keys', { skip: SKIP_POSTGRES }, () => {
  describe('one store', () => {
    it("keeps a change's key with it (create, update, delete), as given, and never over a kept one", async (t) => {
      const schema = freshSchema(t)
      const store = await openOn(t, schema)
      const created = await store.create(makeUser(), undefined, {
        idempotency: keyed('admin', 'k1'),
      })
      const found = await store.keys.find('admin', 'k1')
      assert.deepEqual(found, keyed('admin', 'k1', 'a'.repeat(64), found?.expiresAt).keep(created))
      const updated = await store.update(
        created.user.id,
        (current) => changeUser(current.user, { name: 'Renamed' }),
        { idempotency: keyed('admin', 'k2', 'b'.repeat(64)) },
      )
      assert.equal((await store.keys.find('admin', 'k2'))?.answer.body, updated.json)
      await store.delete(created.user.id, undefined, { idempotency: keyed('admin', 'k3') })
      assert.deepEqual((await store.keys.find('admin', 'k3'))?.answer, { status: 204 })
      // The same key of another subject is another key.
      assert.equal(await store.keys.find('other', 'k1'), undefined)
      // A key kept is not overwritten, alone or by a change, and that change is not made.
      await assert.rejects(
        store.keys.keepAlone(keyed('admin', 'k1', 'c'.repeat(64)).keep(undefined)),
        { code: 'idempotency_key_in_use' },
      )
      await assert.rejects(
        store.create(makeUser(), undefined, { idempotency: keyed('admin', 'k1') }),
        {
          code: 'idempotency_key_in_use',
        },
      )
      assert.equal((await store.keys.find('admin', 'k1'))?.fingerprint, 'a'.repeat(64))
      assert.equal((await listAll(store)).length, 0)
      assert.equal(await eventCount(schema), 3)
      assert.deepEqual(
        (await rows(schema)).map((row) => [row['key'], row['status'], row['holder'], row['held']]),
        [
          ['k1', 201, null, false],
          ['k2', 201, null, false],
          ['k3', 204, null, false],
        ],
      )
    })

    it('keeps no key for an update that changes nothing (no event): that one is kept alone', async (t) => {
      const schema = freshSchema(t)
      const store = await openOn(t, schema)
      const created = await store.create(makeUser())
      const key = keyed('admin', 'same')
      await store.update(created.user.id, (current) => ({ ...current.user }), {
        idempotency: key,
      })
      assert.equal(key.calls, 0)
      assert.equal(await store.keys.find('admin', 'same'), undefined)
      await store.keys.keepAlone(key.keep(created))
      assert.equal((await store.keys.find('admin', 'same'))?.answer.status, 201)
    })

    it('holds a key once at a time, gives it back on release, and answers held for a kept key without touching it', async (t) => {
      const schema = freshSchema(t)
      const store = await openOn(t, schema)
      assert.equal(await store.keys.hold('admin', 'h'), 'held')
      assert.equal(await store.keys.hold('admin', 'h'), 'in_use')
      assert.equal(await store.keys.hold('other', 'h'), 'held')
      assert.deepEqual(await rows(schema), [
        { subject: 'admin', key: 'h', status: null, holder: store.keys.holder, held: true },
        { subject: 'other', key: 'h', status: null, holder: store.keys.holder, held: true },
      ])
      await store.keys.release('admin', 'h')
      assert.equal(await store.keys.hold('admin', 'h'), 'held')
      // The held key kept by its change: the row becomes the answer.
      await store.create(makeUser(), undefined, { idempotency: keyed('admin', 'h') })
      const before = await sql(
        `SELECT xmin::text AS x FROM ${schema}.idempotency_keys WHERE subject = 'admin'`,
      )
      assert.equal(await store.keys.hold('admin', 'h'), 'held')
      await store.keys.release('admin', 'h')
      const after = await sql(
        `SELECT xmin::text AS x FROM ${schema}.idempotency_keys WHERE subject = 'admin'`,
      )
      assert.deepEqual(after.rows, before.rows, 'the kept row is not written')
      assert.equal((await store.keys.find('admin', 'h'))?.answer.status, 201)
    })

    it('forgets an expired key: not found, and held anew', async (t) => {
      const schema = freshSchema(t)
      const store = await openOn(t, schema)
      await store.keys.keepAlone(
        keyed('admin', 'old', 'a'.repeat(64), Date.now() - 1).keep(undefined),
      )
      assert.equal(await store.keys.find('admin', 'old'), undefined)
      assert.equal(await store.keys.hold('admin', 'old'), 'held')
      assert.deepEqual(await rows(schema), [
        { subject: 'admin', key: 'old', status: null, holder: store.keys.holder, held: true },
      ])
    })
  })

  describe('a group commit of creates', () => {
    it("keeps each create's key with its row in the batch's transaction, and none for a create it refuses", async (t) => {
      const schema = freshSchema(t)
      const store = await openOn(t, schema)
      const taken = await store.create(makeUser({ email: 'taken@example.com' }))
      await store.keys.keepAlone(keyed('admin', 'kept').keep(undefined))
      const users = Array.from({ length: 20 }, () => makeUser())
      // The first create goes alone; the others, queued meanwhile, share a batch, the refused
      // ones among them.
      const outcomes = await Promise.allSettled([
        ...users.map((user, i) =>
          store.create(user, undefined, { idempotency: keyed('admin', `k${i}`) }),
        ),
        store.create(makeUser({ email: 'TAKEN@example.com' }), undefined, {
          idempotency: keyed('admin', 'duplicate'),
        }),
        store.create(makeUser(), undefined, { idempotency: keyed('admin', 'kept') }),
        store.create(makeUser(), undefined, { idempotency: keyed('admin', 'k5') }),
      ])
      assert.deepEqual(
        outcomes.map((outcome) =>
          outcome.status === 'fulfilled'
            ? 'created'
            : String((outcome.reason as { code?: unknown }).code),
        ),
        [
          ...users.map(() => 'created'),
          'duplicate_email',
          'idempotency_key_in_use',
          'idempotency_key_in_use',
        ],
      )
      assert.equal(await store.keys.find('admin', 'duplicate'), undefined)
      assert.deepEqual((await store.keys.find('admin', 'kept'))?.answer, { status: 204 })
      for (const [i, user] of users.entries()) {
        const kept = await store.keys.find('admin', `k${i}`)
        assert.equal(kept?.answer.headers?.['location'], `/users/${user.id}`)
      }
      assert.deepEqual(
        (await listAll(store)).map((record) => record.user.id).sort(),
        [taken.user.id, ...users.map((user) => user.id)].sort(),
      )
      assert.equal(await eventCount(schema), 1 + users.length)
      const transactions = await sql(
        `SELECT count(DISTINCT xmin::text) AS n FROM ${schema}.idempotency_keys WHERE key LIKE 'k%'`,
      )
      assert.ok(
        Number(transactions.rows[0]?.n) <= 3,
        `${String(transactions.rows[0]?.n)} transactions`,
      )
    })
  })

  describe('a change that rolls back', () => {
    it('leaves no key, and gives its hold back: its transaction fails after the key was written (the event counter held past the statement time-out)', async (t) => {
      const schema = freshSchema(t)
      const store = await openOn(t, schema, { databaseStatementTimeoutMs: 300 })
      const user = await store.create(makeUser())
      const gone = await store.create(makeUser())
      const events = await eventCount(schema)
      for (const key of ['create', 'update', 'delete'])
        assert.equal(await store.keys.hold('admin', key), 'held')
      const holder = new pg.Client({ connectionString: requireDatabaseUrl() })
      await holder.connect()
      t.after(() => holder.end())
      await holder.query(`SET search_path TO ${schema}`)
      await holder.query('BEGIN')
      await holder.query('SELECT * FROM event_counter FOR UPDATE')
      await assert.rejects(
        store.create(makeUser(), undefined, { idempotency: keyed('admin', 'create') }),
        { code: 'storage_unavailable' },
      )
      await assert.rejects(
        store.update(user.user.id, (current) => changeUser(current.user, { name: 'New' }), {
          idempotency: keyed('admin', 'update'),
        }),
        { code: 'storage_unavailable' },
      )
      await assert.rejects(
        store.delete(gone.user.id, undefined, { idempotency: keyed('admin', 'delete') }),
        { code: 'storage_unavailable' },
      )
      await holder.query('ROLLBACK')
      for (const key of ['create', 'update', 'delete'])
        assert.equal(await store.keys.find('admin', key), undefined, key)
      // Neither the keys nor the holds are left: a retry may go on at once.
      assert.deepEqual(await rows(schema), [])
      assert.equal((await store.get(user.user.id))?.user.name, user.user.name)
      assert.equal(await store.isDeleted(gone.user.id), false)
      assert.equal((await listAll(store)).length, 2)
      assert.equal(await eventCount(schema), events)
    })
  })

  describe('the sweep', () => {
    it('deletes expired keys and stale holds, and nothing else', async (t) => {
      const schema = freshSchema(t)
      const short = { keyTimings: { holdLeaseMs: 200, holdRenewMs: 50 } }
      const dead = await openOn(t, schema, short)
      // The live hold's lease is the default one: a stall of the test must not let it lapse.
      const store = await openOn(t, schema)
      await store.keys.keepAlone(
        keyed('admin', 'expired', 'a'.repeat(64), Date.now() - 1).keep(undefined),
      )
      await store.keys.keepAlone(keyed('admin', 'kept').keep(undefined))
      assert.equal(await store.keys.hold('admin', 'live'), 'held')
      assert.equal(await dead.keys.hold('admin', 'stale'), 'held')
      await dead.close()
      await new Promise((resolve) => setTimeout(resolve, 500))
      assert.equal(await store.keys.sweep(), 2)
      assert.deepEqual(
        (await rows(schema)).map((row) => row['key']),
        ['kept', 'live'],
      )
      assert.equal((await store.keys.find('admin', 'kept'))?.answer.status, 204)
    })

    it('runs by itself on every replica', async (t) => {
      const schema = freshSchema(t)
      const store = await openOn(t, schema, { keyTimings: { sweepMs: 100 } })
      await store.keys.keepAlone(
        keyed('admin', 'expired', 'a'.repeat(64), Date.now() + 2000).keep(undefined),
      )
      assert.equal((await rows(schema)).length, 1)
      await waitFor(
        'the expired key to be swept',
        async () => (await rows(schema)).length === 0,
        10_000,
      )
    })
  })

  describe('migration 7', () => {
    it('migrates a schema-6 database: its users stay, keys are kept, and writers of the old release go on', async (t) => {
      const schema = freshSchema(t)
      const user = makeUser()
      const client = new pg.Client({ connectionString: requireDatabaseUrl() })
      await client.connect()
      try {
        await client.query(`CREATE SCHEMA ${schema}`)
        await client.query(`SET search_path TO ${schema}`)
        await client.query(
          'CREATE TABLE user_service_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
        )
        for (const [i, statements] of MIGRATIONS.slice(0, 6).entries()) {
          await client.query('BEGIN')
          for (const statement of statements) await client.query(statement)
          await client.query('INSERT INTO user_service_schema (version) VALUES ($1)', [i + 1])
          await client.query('COMMIT')
        }
      } finally {
        await client.end()
      }
      const oldInsert = (u: typeof user): Promise<unknown> =>
        sql(
          `INSERT INTO ${schema}.users (id, email, email_key, name, name_key, status, metadata, created_at, updated_at, version)
          VALUES ($1, $2, $3, $4, $5, $6, '{}', $7, $8, $9)`,
          [
            u.id,
            u.email,
            u.email.toLowerCase(),
            u.name,
            u.name.toLowerCase(),
            u.status,
            u.createdAt,
            u.updatedAt,
            u.version,
          ],
        )
      await oldInsert(user)
      const store = await openOn(t, schema)
      const versions = await sql(`SELECT max(version) AS v FROM ${schema}.user_service_schema`)
      assert.equal(versions.rows[0]?.v, SCHEMA_VERSION)
      const columns = await sql(
        `SELECT column_name AS name FROM information_schema.columns
        WHERE table_schema = $1 AND table_name = 'idempotency_keys' ORDER BY ordinal_position`,
        [schema],
      )
      assert.deepEqual(
        columns.rows.map((row: { name: string }) => row.name),
        [
          'subject',
          'key',
          'fingerprint',
          'status',
          'content_type',
          'location',
          'etag',
          'body',
          'answered_at',
          'expires_at',
          'holder',
          'held_until',
        ],
      )
      assert.deepEqual((await store.get(user.id))?.user, user)
      const updated = await store.update(
        user.id,
        (current) => changeUser(current.user, { name: 'New' }),
        {
          idempotency: keyed('admin', 'k'),
        },
      )
      assert.equal((await store.keys.find('admin', 'k'))?.answer.body, updated.json)
      // The previous release writes users as before (it knows nothing of keys).
      const other = makeUser()
      await oldInsert(other)
      assert.deepEqual((await store.get(other.id))?.user, other)
    })
  })
})
