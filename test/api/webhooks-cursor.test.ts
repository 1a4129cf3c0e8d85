import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'

import { createIdGenerator } from '../../src/domain/uuid7.js'
import type { DeliveryAttempt } from '../../src/domain/webhook.js'
import { FileStore } from '../../src/store/file/file-store.js'
import { assertProblem } from '../helpers/http.js'
import { makeTempDir } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { assertFieldErrors } from '../helpers/users-suite.js'
import {
  assertEndpoint,
  assertHooksUnchangedBy,
  type HookService,
  STORES,
  startHooks,
} from '../helpers/webhook-api.js'

const READER = makeToken({ scope: 'events:read' })

/** Adds `count` attempts of event 1, 2, … to an endpoint's log, as delivery would; oldest first. */
async function logAttempts(s: HookService, id: string, count: number): Promise<DeliveryAttempt[]> {
  const newId = createIdGenerator()
  const made: DeliveryAttempt[] = []
  for (let i = 1; i <= count; i += 1) {
    const eventId = i.toString(16).padStart(16, '0')
    const attempt: DeliveryAttempt = {
      id: newId(Date.now()).id,
      webhookId: `msg_${eventId}`,
      eventId,
      eventType: 'user.created',
      attempt: 1,
      time: new Date().toISOString(),
      durationMs: i,
      result: i % 2 === 0 ? 'succeeded' : 'failed',
      responseStatus: i % 2 === 0 ? 200 : 500,
      error: i % 2 === 0 ? null : 'status',
      response: i % 2 === 0 ? '' : '{"error":"db down"}',
    }
    await s.service.store.webhooks.logAttempt(id, attempt)
    made.push(attempt)
  }
  return made
}

for (const store of STORES) {
  describe(`a webhook endpoint's cursor and delivery log (${store.name} store)`, {
    skip: store.skip,
  }, () => {
    it('PUT /webhooks/{id}/cursor moves the cursor, earlier or later, and GET shows it; no version change', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      await s.createUser()
      for (const after of ['0000000000000000', '00000000000000ff', '7fffffffffffffff']) {
        const res = await s.hooks('PUT', `/${created.id}/cursor`, { json: { after } })
        assert.equal(res.status, 200, res.text)
        assert.deepEqual(res.body, { after })
        assert.equal(res.headers.get('cache-control'), 'no-store')
        const shown = await s.hooks('GET', `/${created.id}/cursor`)
        assert.deepEqual(shown.body, { after })
        assert.equal(await s.service.store.webhooks.cursor(created.id), after)
      }
      assert.equal(assertEndpoint(await s.hooks('GET', `/${created.id}`)).version, 1)
    })

    it('PUT /webhooks/{id}/cursor refuses a malformed after with 422 and moves nothing', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      await assertHooksUnchangedBy(s, async () => {
        const path = `/${created.id}/cursor`
        for (const [json, pointer, code] of [
          [{}, '/after', 'required'],
          [{ after: null }, '/after', 'required'],
          [{ after: 12 }, '/after', 'invalid_type'],
          [{ after: '12' }, '/after', 'invalid_format'],
          [{ after: '000000000000000G' }, '/after', 'invalid_format'],
          [{ after: '000000000000000A' }, '/after', 'invalid_format'],
          [{ after: '8000000000000000' }, '/after', 'invalid_format'],
          [{ after: '0000000000000001', before: 'x' }, '/before', 'unknown_field'],
          [{ after: '0000000000000001', secret: 'whsec_x' }, '/secret', 'read_only'],
          [[], '', 'invalid_type'],
        ] as const) {
          assertFieldErrors(await s.hooks('PUT', path, { json }), [{ pointer, code }])
        }
        assertProblem(
          await s.hooks('PUT', path, { body: 'x', contentType: 'text/plain' }),
          415,
          'unsupported_media_type',
        )
      })
    })

    it('GET /webhooks/{id}/deliveries pages the log newest first with a signed cursor and Link', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      const other = await s.createHook()
      const empty = await s.hooks('GET', `/${created.id}/deliveries`)
      assert.equal(empty.status, 200, empty.text)
      assert.deepEqual(empty.body, { items: [], nextCursor: null })
      assert.equal(empty.headers.get('cache-control'), 'private, no-cache')
      const made = await logAttempts(s, created.id, 45)
      await logAttempts(s, other.id, 3)
      const first = await s.hooks('GET', `/${created.id}/deliveries`)
      const page = first.json<{ items: DeliveryAttempt[]; nextCursor: string | null }>()
      assert.equal(page.items.length, 20, 'the default limit')
      assert.deepEqual(page.items[0], made[44])
      assert.deepEqual(Object.keys(page.items[0] ?? {}), Object.keys(made[0] ?? {}))
      assert.equal(typeof page.nextCursor, 'string')
      assert.equal(
        first.headers.get('link'),
        `</webhooks/${created.id}/deliveries?limit=20&cursor=${page.nextCursor}>; rel="next"`,
      )
      const seen: string[] = []
      let cursor: string | null = null
      do {
        const query: string = cursor === null ? '?limit=7' : `?limit=7&cursor=${cursor}`
        const res = await s.hooks('GET', `/${created.id}/deliveries${query}`)
        assert.equal(res.status, 200, res.text)
        const next = res.json<{ items: DeliveryAttempt[]; nextCursor: string | null }>()
        seen.push(...next.items.map((item) => item.id))
        cursor = next.nextCursor
        assert.equal(res.headers.get('link') === null, cursor === null)
      } while (cursor !== null)
      assert.deepEqual(seen, made.map((attempt) => attempt.id).reverse())
      const exact = await s.hooks('GET', `/${created.id}/deliveries?limit=45`)
      assert.equal(
        (exact.body as { nextCursor: unknown }).nextCursor,
        null,
        'no page after the last',
      )
      // A cursor of one endpoint is not another's; a tampered or foreign one is 400.
      for (const [id, query] of [
        [other.id, `?cursor=${page.nextCursor}`],
        [created.id, `?cursor=${page.nextCursor}x`],
        [created.id, '?cursor=abc.def'],
        [created.id, '?limit=0'],
        [created.id, '?limit=101'],
        [created.id, '?limit=ten'],
        [created.id, '?limit=1&limit=2'],
        [created.id, '?limit='],
        [created.id, '?since=1'],
      ] as const) {
        assertProblem(await s.hooks('GET', `/${id}/deliveries${query}`), 400, 'bad_request')
      }
      // A users' list cursor is signed with another key.
      await s.createUser()
      await s.createUser()
      const users = await s.call('GET', '/users?limit=1')
      const userCursor = String(users.json<{ nextCursor: string }>().nextCursor)
      assertProblem(
        await s.hooks('GET', `/${created.id}/deliveries?cursor=${userCursor}`),
        400,
        'bad_request',
      )
    })
  })
}

describe('a webhook cursor behind the retained feed (file store)', () => {
  it('PUT of an event id older than the retained feed is 410 cursor_expired; PATCH enabled:true is 410 until the cursor is PUT', async (t) => {
    let clock = Date.now()
    const dir = path.join(await makeTempDir(t), 'data')
    const store = new FileStore({ dataDir: dir, now: () => clock, eventsRetentionDays: 30 })
    const s = await startHooks(t, { name: 'file', skip: false, make: () => ({ store }) })
    const created = await s.createHook()
    await s.createUser()
    clock += 31 * 86_400_000
    await s.createUser()
    await store.pruneEvents()
    const feed = await s.call('GET', '/events', { token: READER })
    const retained = (feed.body as { items: { id: string }[] }).items.map((event) => event.id)
    assert.equal(retained.length, 1)
    await assertHooksUnchangedBy(s, async () => {
      assertProblem(
        await s.hooks('PUT', `/${created.id}/cursor`, { json: { after: '0000000000000000' } }),
        410,
        'cursor_expired',
      )
    })
    // Delivery found the cursor behind the feed and disabled the endpoint (as the engine does).
    await s.service.store.webhooks.update(created.id, (current) => ({
      ...current,
      endpoint: {
        ...current.endpoint,
        enabled: false,
        disabledReason: 'cursor_expired',
        disabledAt: new Date(clock).toISOString(),
        version: current.endpoint.version + 1,
      },
    }))
    await assertHooksUnchangedBy(s, async () => {
      assertProblem(
        await s.hooks('PATCH', `/${created.id}`, { json: { enabled: true } }),
        410,
        'cursor_expired',
      )
      // 422 before 410.
      assertFieldErrors(
        await s.hooks('PATCH', `/${created.id}`, { json: { enabled: true, url: 'x' } }),
        [{ pointer: '/url', code: 'invalid_format' }],
      )
    })
    const moved = await s.hooks('PUT', `/${created.id}/cursor`, {
      json: { after: retained[0] ?? '' },
    })
    assert.equal(moved.status, 200, moved.text)
    const resumed = assertEndpoint(
      await s.hooks('PATCH', `/${created.id}`, { json: { enabled: true } }),
    )
    assert.deepEqual(
      [resumed.enabled, resumed.disabledReason, resumed.disabledAt, resumed.version],
      [true, null, null, 3],
    )
  })
})
