import assert from 'node:assert/strict'
import { rm } from 'node:fs/promises'
import { describe, it } from 'node:test'

import { ServiceError } from '../../src/domain/errors.js'
import { formatEventId } from '../../src/domain/event.js'
import { KEPT_ATTEMPTS } from '../../src/store/webhook-store.js'
import { openStore, type StoreFactory } from './store-suite.js'
import { makeUser } from './store-users.js'
import { changeWebhook, makeAttempt, makeSecret, makeWebhook } from './webhook-values.js'

/** Asserts that `promise` rejects with a ServiceError of this code. */
export async function rejectsWithCode(promise: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof ServiceError, `not a ServiceError: ${String(error)}`)
    assert.equal(error.code, code)
    return true
  })
}

const ZERO = formatEventId(0)
const MAX = 20

/**
 * The behaviour every WebhookStore has (store/webhook-store.ts), through `Store.webhooks`, and the
 * feed's head that a new endpoint's cursor starts at, run against stores made by `factory`.
 */
export function describeWebhookStoreContract(label: string, factory: StoreFactory): void {
  describe(`${label}: webhook endpoints`, () => {
    it('lists no endpoint at first, and knows no id', async (t) => {
      const { webhooks } = await openStore(t, factory)
      assert.deepEqual(await webhooks.list(), [])
      assert.equal(await webhooks.get(makeWebhook().endpoint.id), undefined)
      assert.equal(await webhooks.cursor(makeWebhook().endpoint.id), undefined)
    })

    it('gets what create stored, secrets included, and lists every endpoint oldest first', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const first = makeWebhook({
        eventTypes: ['user.created', 'user.deleted'],
        description: 'CRM',
      })
      const second = { ...makeWebhook(), previousSecret: makeSecret() }
      const third = makeWebhook({
        enabled: false,
        disabledReason: 'manual',
        disabledAt: new Date().toISOString(),
      })
      // Created out of order: the list follows age, not the order of the calls.
      await webhooks.create(third, ZERO, MAX)
      await webhooks.create(first, ZERO, MAX)
      await webhooks.create(second, formatEventId(7), MAX)
      assert.deepEqual(await webhooks.get(first.endpoint.id), first)
      assert.deepEqual(await webhooks.get(second.endpoint.id), second)
      assert.deepEqual(await webhooks.list(), [first, second, third])
      assert.equal(await webhooks.cursor(second.endpoint.id), formatEventId(7))
    })

    it('refuses a taken id with duplicate_id, keeping the first', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      await webhooks.create(hook, ZERO, MAX)
      const again = {
        ...makeWebhook(),
        endpoint: { ...makeWebhook().endpoint, id: hook.endpoint.id },
      }
      await rejectsWithCode(webhooks.create(again, ZERO, MAX), 'duplicate_id')
      assert.deepEqual(await webhooks.list(), [hook])
    })

    it('refuses one endpoint past max with webhook_limit_reached, and takes one after a delete', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hooks = [makeWebhook(), makeWebhook(), makeWebhook()]
      for (const hook of hooks) await webhooks.create(hook, ZERO, 3)
      const extra = makeWebhook()
      await rejectsWithCode(webhooks.create(extra, ZERO, 3), 'webhook_limit_reached')
      assert.equal(await webhooks.get(extra.endpoint.id), undefined)
      assert.equal((await webhooks.list()).length, 3)
      await webhooks.delete(hooks[0]?.endpoint.id ?? '')
      await webhooks.create(extra, ZERO, 3)
      assert.equal((await webhooks.list()).length, 3)
    })

    it('lets concurrent creates pass the limit no further than max', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const results = await Promise.allSettled(
        Array.from({ length: 8 }, () => webhooks.create(makeWebhook(), ZERO, 5)),
      )
      assert.equal(results.filter((result) => result.status === 'fulfilled').length, 5)
      for (const result of results) {
        if (result.status === 'rejected') {
          assert.ok(result.reason instanceof ServiceError)
          assert.equal(result.reason.code, 'webhook_limit_reached')
        }
      }
      assert.equal((await webhooks.list()).length, 5)
    })

    it('refuses an id that is not a canonical UUID, a NUL or a malformed cursor, storing nothing', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      const upper = { ...hook, endpoint: { ...hook.endpoint, id: hook.endpoint.id.toUpperCase() } }
      await rejectsWithCode(webhooks.create(upper, ZERO, MAX), 'validation_failed')
      const dots = { ...hook, endpoint: { ...hook.endpoint, id: '../../etc/passwd' } }
      await rejectsWithCode(webhooks.create(dots, ZERO, MAX), 'validation_failed')
      const nul = { ...hook, endpoint: { ...hook.endpoint, description: 'a\u0000b' } }
      await rejectsWithCode(webhooks.create(nul, ZERO, MAX), 'validation_failed')
      await rejectsWithCode(webhooks.create(hook, 'zz', MAX), 'validation_failed')
      assert.deepEqual(await webhooks.list(), [])
    })
  })

  describe(`${label}: webhook updates and deletes`, () => {
    it('stores what the change returns and returns it', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      await webhooks.create(hook, ZERO, MAX)
      const rotated = changeWebhook(
        hook,
        { previousSecretExpiresAt: new Date(Date.now() + 86_400_000).toISOString() },
        { secret: makeSecret(), previousSecret: hook.secret },
      )
      const result = await webhooks.update(hook.endpoint.id, (current) => {
        assert.deepEqual(current, hook)
        return rotated
      })
      assert.deepEqual(result, rotated)
      assert.deepEqual(await webhooks.get(hook.endpoint.id), rotated)
      const listed = await webhooks.list()
      assert.deepEqual(listed, [rotated])
    })

    it('keeps the endpoint when the change returns undefined, and returns it as it is', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      await webhooks.create(hook, ZERO, MAX)
      assert.deepEqual(await webhooks.update(hook.endpoint.id, () => undefined), hook)
      assert.deepEqual(await webhooks.get(hook.endpoint.id), hook)
    })

    it('changes nothing when the change throws, and rejects with its error', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      await webhooks.create(hook, ZERO, MAX)
      await rejectsWithCode(
        webhooks.update(hook.endpoint.id, () => {
          throw new ServiceError('precondition_failed', 'no')
        }),
        'precondition_failed',
      )
      assert.deepEqual(await webhooks.get(hook.endpoint.id), hook)
    })

    it('runs concurrent changes one after the other, each on the one before', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      await webhooks.create(hook, ZERO, MAX)
      await Promise.all(
        Array.from({ length: 10 }, () =>
          webhooks.update(hook.endpoint.id, (current) => changeWebhook(current)),
        ),
      )
      assert.equal((await webhooks.get(hook.endpoint.id))?.endpoint.version, 11)
    })

    it('answers not_found for an unknown id, and refuses a change of the id', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const unknown = makeWebhook()
      await rejectsWithCode(webhooks.update(unknown.endpoint.id, changeWebhook), 'not_found')
      await rejectsWithCode(webhooks.delete(unknown.endpoint.id), 'not_found')
      const hook = makeWebhook()
      await webhooks.create(hook, ZERO, MAX)
      await rejectsWithCode(
        webhooks.update(hook.endpoint.id, () => changeWebhook(unknown)),
        'validation_failed',
      )
      assert.deepEqual(await webhooks.list(), [hook])
    })

    it('deletes the endpoint with its cursor and its log, and only that one', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const gone = makeWebhook()
      const kept = makeWebhook()
      await webhooks.create(gone, formatEventId(3), MAX)
      await webhooks.create(kept, formatEventId(4), MAX)
      await webhooks.logAttempt(gone.endpoint.id, makeAttempt(4))
      await webhooks.logAttempt(kept.endpoint.id, makeAttempt(5))
      await webhooks.delete(gone.endpoint.id)
      assert.equal(await webhooks.get(gone.endpoint.id), undefined)
      assert.equal(await webhooks.cursor(gone.endpoint.id), undefined)
      assert.deepEqual(await webhooks.attempts(gone.endpoint.id, 10), [])
      assert.deepEqual(await webhooks.list(), [kept])
      assert.equal(await webhooks.cursor(kept.endpoint.id), formatEventId(4))
      assert.equal((await webhooks.attempts(kept.endpoint.id, 10)).length, 1)
      await rejectsWithCode(webhooks.delete(gone.endpoint.id), 'not_found')
      await rejectsWithCode(webhooks.setCursor(gone.endpoint.id, ZERO), 'not_found')
      assert.equal(
        await webhooks.advanceCursor(gone.endpoint.id, formatEventId(3), formatEventId(5)),
        false,
      )
    })
  })

  describe(`${label}: webhooks of a read-only store`, () => {
    it('refuses endpoint and cursor writes with storage_unavailable, and keeps reads', async (t) => {
      const store = await openStore(t, factory)
      const { dataDir, turnsReadOnly } = store.capabilities
      if (!turnsReadOnly || dataDir === undefined) {
        t.skip('this store cannot be made read-only from outside')
        return
      }
      const { webhooks } = store
      const hook = makeWebhook()
      const id = hook.endpoint.id
      await webhooks.create(hook, formatEventId(2), MAX)
      await rm(dataDir, { recursive: true, force: true })
      const deadline = Date.now() + 5000
      while (store.health().state !== 'read_only' && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20))
      assert.equal(store.health().state, 'read_only')
      await rejectsWithCode(webhooks.create(makeWebhook(), ZERO, MAX), 'storage_unavailable')
      await rejectsWithCode(
        webhooks.update(id, (current) => changeWebhook(current)),
        'storage_unavailable',
      )
      await rejectsWithCode(webhooks.setCursor(id, formatEventId(9)), 'storage_unavailable')
      await rejectsWithCode(webhooks.delete(id), 'storage_unavailable')
      assert.deepEqual(await webhooks.list(), [hook])
      assert.equal(await webhooks.cursor(id), formatEventId(2))
    })
  })

  describe(`${label}: webhook cursors`, () => {
    it('moves the cursor on a 2xx only from where it is, and refuses an advance from elsewhere', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      const id = hook.endpoint.id
      await webhooks.create(hook, formatEventId(10), MAX)
      assert.equal(await webhooks.advanceCursor(id, formatEventId(10), formatEventId(12)), true)
      assert.equal(await webhooks.cursor(id), formatEventId(12))
      assert.equal(await webhooks.advanceCursor(id, formatEventId(10), formatEventId(13)), false)
      assert.equal(await webhooks.cursor(id), formatEventId(12))
    })

    it('refuses an advance while the endpoint is disabled, keeping the cursor', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      const id = hook.endpoint.id
      await webhooks.create(hook, formatEventId(10), MAX)
      await webhooks.update(id, (current) =>
        changeWebhook(current, { enabled: false, disabledReason: 'manual' }),
      )
      assert.equal(await webhooks.advanceCursor(id, formatEventId(10), formatEventId(11)), false)
      assert.equal(await webhooks.cursor(id), formatEventId(10))
      await webhooks.update(id, (current) =>
        changeWebhook(current, { enabled: true, disabledReason: null }),
      )
      assert.equal(await webhooks.advanceCursor(id, formatEventId(10), formatEventId(11)), true)
      assert.equal(await webhooks.cursor(id), formatEventId(11))
    })

    it("lets a client's move win over an advance from the cursor it replaced", async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      const id = hook.endpoint.id
      await webhooks.create(hook, formatEventId(10), MAX)
      await webhooks.setCursor(id, formatEventId(2))
      assert.equal(await webhooks.cursor(id), formatEventId(2))
      assert.equal(await webhooks.advanceCursor(id, formatEventId(10), formatEventId(11)), false)
      assert.equal(await webhooks.cursor(id), formatEventId(2))
      // Ahead too: a client may skip.
      await webhooks.setCursor(id, formatEventId(0x1f))
      assert.equal(await webhooks.cursor(id), formatEventId(0x1f))
    })

    it('refuses a cursor that is not an event id, keeping the one it has', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      await webhooks.create(hook, formatEventId(5), MAX)
      await rejectsWithCode(webhooks.setCursor(hook.endpoint.id, 'ABC'), 'validation_failed')
      await rejectsWithCode(
        webhooks.advanceCursor(hook.endpoint.id, formatEventId(5), '0000000000000006 '),
        'validation_failed',
      )
      assert.equal(await webhooks.cursor(hook.endpoint.id), formatEventId(5))
    })
  })

  describe(`${label}: webhook delivery logs`, () => {
    it('gives attempts newest first, `limit` at most, and those before an attempt id', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      const id = hook.endpoint.id
      await webhooks.create(hook, ZERO, MAX)
      const logged = [
        makeAttempt(1, 1),
        makeAttempt(1, 2, { responseStatus: null, error: 'timeout', response: '' }),
        makeAttempt(1, 3, { result: 'succeeded', responseStatus: 204, error: null, response: '' }),
        makeAttempt(2, 1, { eventType: 'user.deleted', response: 'ünïcode ✓ \u0000 NUL' }),
      ]
      for (const attempt of logged) await webhooks.logAttempt(id, attempt)
      const newest = [...logged].reverse()
      assert.deepEqual(await webhooks.attempts(id, 10), newest)
      assert.deepEqual(await webhooks.attempts(id, 2), newest.slice(0, 2))
      assert.deepEqual(await webhooks.attempts(id, 2, newest[1]?.id), newest.slice(2, 4))
      assert.deepEqual(await webhooks.attempts(id, 10, newest[3]?.id), [])
    })

    it(`keeps the newest ${KEPT_ATTEMPTS} attempts of an endpoint`, async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      const other = makeWebhook()
      const id = hook.endpoint.id
      await webhooks.create(hook, ZERO, MAX)
      await webhooks.create(other, ZERO, MAX)
      const logged = Array.from({ length: KEPT_ATTEMPTS + 150 }, (_, i) => makeAttempt(i + 1))
      for (const attempt of logged) await webhooks.logAttempt(id, attempt)
      await webhooks.logAttempt(other.endpoint.id, makeAttempt(1))
      const kept = await webhooks.attempts(id, KEPT_ATTEMPTS * 2)
      assert.equal(kept.length, KEPT_ATTEMPTS)
      assert.deepEqual(kept[0], logged.at(-1))
      assert.deepEqual(kept.at(-1), logged[150])
      assert.equal((await webhooks.attempts(other.endpoint.id, 10)).length, 1)
    })
  })

  describe(`${label}: webhook leases`, () => {
    it('grants and renews the lease of an endpoint to its holder, and takes it back', async (t) => {
      const { webhooks } = await openStore(t, factory)
      const hook = makeWebhook()
      await webhooks.create(hook, ZERO, MAX)
      assert.equal(await webhooks.lease(hook.endpoint.id, 'process-a', 10_000), true)
      assert.equal(await webhooks.lease(hook.endpoint.id, 'process-a', 10_000), true)
      await webhooks.releaseLease(hook.endpoint.id, 'process-a')
      assert.equal(await webhooks.lease(hook.endpoint.id, 'process-a', 10_000), true)
    })

    it('grants no lease for an endpoint that is not there', async (t) => {
      const { webhooks } = await openStore(t, factory)
      assert.equal(await webhooks.lease(makeWebhook().endpoint.id, 'process-a', 10_000), false)
    })
  })

  describe(`${label}: the feed's head`, () => {
    it('is below every event committed after it, then the newest event committed', async (t) => {
      const store = await openStore(t, factory)
      // 0000000000000000 for a store that keeps nothing; past it where a start raised the ids.
      const start = await store.events.head()
      assert.match(start, /^[0-9a-f]{16}$/)
      assert.deepEqual((await store.events.read({ after: start, limit: 10 })).items, [])
      await store.create(makeUser())
      const user = await store.create(makeUser())
      const page = await store.events.read({ limit: 10 })
      assert.equal(page.items.length, 2)
      assert.deepEqual((await store.events.read({ after: start, limit: 10 })).items, page.items)
      assert.equal(await store.events.head(), page.items[1]?.id)
      await store.delete(user.user.id)
      const after = await store.events.read({ after: page.items[1]?.id ?? ZERO, limit: 10 })
      assert.equal(after.items.length, 1)
      assert.equal(await store.events.head(), after.items[0]?.id)
    })
  })
}
