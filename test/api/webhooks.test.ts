import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { assertProblem } from '../helpers/http.js'
import { makeToken } from '../helpers/tokens.js'
import { assertFieldErrors } from '../helpers/users-suite.js'
import {
  ADMIN,
  assertEndpoint,
  assertHooksUnchangedBy,
  type Endpoint,
  SECRET_SHAPE,
  STORES,
  startHooks,
  UNKNOWN_ID,
} from '../helpers/webhook-api.js'

const FIELDS = [
  'id',
  'url',
  'eventTypes',
  'description',
  'enabled',
  'disabledReason',
  'disabledAt',
  'previousSecretExpiresAt',
  'createdAt',
  'updatedAt',
  'version',
]

for (const store of STORES) {
  describe(`the /webhooks resource (${store.name} store)`, { skip: store.skip }, () => {
    it('POST /webhooks answers 201 with the endpoint, its secret, Location and ETag, no-store', async (t) => {
      const s = await startHooks(t, store)
      const res = await s.hooks('POST', '', {
        json: {
          url: 'https://crm.example.com/hooks/users?source=user-service',
          eventTypes: ['user.created', 'user.deleted'],
          description: '  CRM sync  ',
        },
      })
      const created = assertEndpoint(res, 201) as Endpoint & { secret: string }
      assert.deepEqual(Object.keys(created), [...FIELDS, 'secret'])
      assert.match(created.secret, SECRET_SHAPE)
      assert.equal(Buffer.from(created.secret.slice(6), 'base64').length, 32)
      assert.equal(res.headers.get('location'), `/webhooks/${created.id}`)
      assert.equal(res.headers.get('cache-control'), 'no-store')
      assert.match(
        created.id,
        /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
      )
      assert.deepEqual(
        { ...created, id: '', secret: '', createdAt: '', updatedAt: '' },
        {
          id: '',
          url: 'https://crm.example.com/hooks/users?source=user-service',
          eventTypes: ['user.created', 'user.deleted'],
          description: 'CRM sync',
          enabled: true,
          disabledReason: null,
          disabledAt: null,
          previousSecretExpiresAt: null,
          createdAt: '',
          updatedAt: '',
          version: 1,
          secret: '',
        },
      )
      assert.equal(created.createdAt, created.updatedAt)
      const defaults = await s.createHook()
      assert.equal(defaults.eventTypes, null)
      assert.equal(defaults.description, '')
      assert.equal(defaults.enabled, true)
      assert.notEqual(defaults.secret, created.secret)
      const paused = await s.createHook({ enabled: false })
      assert.equal(paused.disabledReason, 'manual')
      assert.equal(paused.disabledAt, paused.createdAt)
    })

    it("starts a new endpoint's cursor at the head of the change feed", async (t) => {
      const s = await startHooks(t, store)
      const empty = await s.createHook()
      const first = await s.hooks('GET', `/${empty.id}/cursor`)
      assert.equal(first.status, 200, first.text)
      const { after: start } = first.body as { after: string }
      assert.match(start, /^[0-9a-f]{16}$/)
      assert.equal(first.headers.get('cache-control'), 'private, no-cache')
      await s.createUser()
      await s.createUser()
      const feed = await s.call('GET', '/events', { token: makeToken({ scope: 'events:read' }) })
      const events = (feed.body as { items: { id: string }[] }).items
      assert.equal(events.length, 2)
      for (const event of events) assert.ok(event.id > start, `${event.id} comes after ${start}`)
      const later = await s.createHook()
      const cursor = await s.hooks('GET', `/${later.id}/cursor`)
      assert.deepEqual(cursor.body, { after: events[events.length - 1]?.id })
    })

    it('GET /webhooks/{id} answers 200 with ETag, private caching and no secret; 304; 412; HEAD', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      const res = await s.hooks('GET', `/${created.id}`)
      const shown = assertEndpoint(res)
      assert.deepEqual(Object.keys(shown), FIELDS)
      const { secret: _secret, ...expected } = created
      assert.deepEqual(shown, expected)
      assert.equal(res.headers.get('cache-control'), 'private, no-cache')
      assert.equal(res.headers.get('vary'), 'Authorization')
      const notModified = await s.hooks('GET', `/${created.id}`, {
        headers: { 'if-none-match': '"v1"' },
      })
      assert.equal(notModified.status, 304)
      assert.equal(notModified.headers.get('etag'), '"v1"')
      assert.equal(notModified.text, '')
      assertProblem(
        await s.hooks('GET', `/${created.id}`, { headers: { 'if-match': '"v9"' } }),
        412,
        'precondition_failed',
      )
      const head = await s.hooks('HEAD', `/${created.id}`)
      assert.equal(head.status, 200)
      assert.equal(head.headers.get('etag'), '"v1"')
      assert.equal(head.text, '')
    })

    it('GET /webhooks lists every endpoint oldest first without secrets; a query parameter is 400', async (t) => {
      const s = await startHooks(t, store)
      const empty = await s.hooks('GET')
      assert.equal(empty.status, 200)
      assert.deepEqual(empty.body, { items: [], nextCursor: null })
      const a = await s.createHook({ description: 'a' })
      const b = await s.createHook({ description: 'b' })
      const c = await s.createHook({ description: 'c' })
      const res = await s.hooks('GET')
      assert.equal(res.status, 200, res.text)
      assert.equal(res.headers.get('cache-control'), 'private, no-cache')
      const page = res.json<{ items: Endpoint[]; nextCursor: null }>()
      assert.deepEqual(
        page.items.map((item) => item.id),
        [a.id, b.id, c.id],
      )
      assert.equal(page.nextCursor, null)
      for (const item of page.items) assert.deepEqual(Object.keys(item), FIELDS)
      assertProblem(await s.hooks('GET', '?limit=1'), 400, 'bad_request')
    })

    it('PATCH changes the named fields with version +1; {} and equal values change nothing', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      const res = await s.hooks('PATCH', `/${created.id}`, {
        body: JSON.stringify({ description: 'renamed', eventTypes: ['user.updated'] }),
        contentType: 'application/merge-patch+json',
        headers: { 'if-match': '"v1"' },
      })
      const patched = assertEndpoint(res)
      assert.equal(patched.version, 2)
      assert.equal(patched.description, 'renamed')
      assert.deepEqual(patched.eventTypes, ['user.updated'])
      assert.equal(patched.url, created.url)
      assert.ok(patched.updatedAt >= created.updatedAt)
      assert.equal(res.headers.get('cache-control'), 'no-store')
      assert.equal('secret' in patched, false)
      const same = await s.hooks('PATCH', `/${created.id}`, {
        json: { description: 'renamed', version: 2, id: created.id, disabledReason: null },
      })
      assert.equal(assertEndpoint(same).version, 2)
      assert.equal(
        assertEndpoint(await s.hooks('PATCH', `/${created.id}`, { json: {} })).version,
        2,
      )
      const all = await s.hooks('PATCH', `/${created.id}`, { json: { eventTypes: null } })
      assert.equal(assertEndpoint(all).eventTypes, null)
    })

    it('PATCH enabled:false disables it as manual, enabled:true resumes and clears the reason', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      const off = assertEndpoint(
        await s.hooks('PATCH', `/${created.id}`, { json: { enabled: false } }),
      )
      assert.equal(off.enabled, false)
      assert.equal(off.disabledReason, 'manual')
      assert.equal(off.disabledAt, off.updatedAt)
      assert.equal(off.version, 2)
      const on = assertEndpoint(
        await s.hooks('PATCH', `/${created.id}`, { json: { enabled: true } }),
      )
      assert.deepEqual(
        { enabled: on.enabled, reason: on.disabledReason, at: on.disabledAt, version: on.version },
        { enabled: true, reason: null, at: null, version: 3 },
      )
    })

    it('PATCH and DELETE answer 412 when If-Match does not match, and change nothing', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      await assertHooksUnchangedBy(s, async () => {
        assertProblem(
          await s.hooks('PATCH', `/${created.id}`, {
            json: { description: 'x' },
            headers: { 'if-match': '"v2"' },
          }),
          412,
          'precondition_failed',
        )
        assertProblem(
          await s.hooks('PATCH', `/${created.id}`, {
            json: { description: 'x' },
            headers: { 'if-none-match': '*' },
          }),
          412,
          'precondition_failed',
        )
        assertProblem(
          await s.hooks('DELETE', `/${created.id}`, { headers: { 'if-match': '"v2"' } }),
          412,
          'precondition_failed',
        )
        assertProblem(
          await s.hooks('POST', `/${created.id}:rotateSecret`, { headers: { 'if-match': '"v7"' } }),
          412,
          'precondition_failed',
        )
      })
    })

    it('DELETE answers 204 then 404, and takes the cursor and the log with it', async (t) => {
      const s = await startHooks(t, store)
      const keep = await s.createHook()
      const gone = await s.createHook()
      const res = await s.hooks('DELETE', `/${gone.id}`, { headers: { 'if-match': '"v1"' } })
      assert.equal(res.status, 204)
      assert.equal(res.text, '')
      assert.equal(res.headers.get('cache-control'), 'no-store')
      assertProblem(await s.hooks('DELETE', `/${gone.id}`), 404, 'not_found')
      assertProblem(await s.hooks('GET', `/${gone.id}`), 404, 'not_found')
      assertProblem(await s.hooks('GET', `/${gone.id}/cursor`), 404, 'not_found')
      assertProblem(await s.hooks('GET', `/${gone.id}/deliveries`), 404, 'not_found')
      assert.equal(await s.service.store.webhooks.cursor(gone.id), undefined)
      const list = await s.hooks('GET')
      assert.deepEqual(
        (list.body as { items: Endpoint[] }).items.map((item) => item.id),
        [keep.id],
      )
    })

    it('answers 404 for an unknown or malformed id on every item route', async (t) => {
      const s = await startHooks(t, store)
      await s.createHook()
      await assertHooksUnchangedBy(s, async () => {
        for (const id of [UNKNOWN_ID, 'nope', UNKNOWN_ID.toUpperCase(), '..%2F..%2Fetc']) {
          for (const [method, suffix, json] of [
            ['GET', '', undefined],
            ['PATCH', '', { description: 'x' }],
            ['DELETE', '', undefined],
            ['POST', ':rotateSecret', undefined],
            ['GET', '/cursor', undefined],
            ['PUT', '/cursor', { after: '0000000000000001' }],
            ['GET', '/deliveries', undefined],
          ] as const) {
            const res = await s.hooks(method, `/${id}${suffix}`, json === undefined ? {} : { json })
            assertProblem(res, 404, 'not_found')
          }
        }
      })
    })

    it('answers 405 with Allow for a method a path does not take, and 404 for an unknown verb', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      const cases: [string, string, string][] = [
        ['DELETE', '', 'GET, POST, HEAD'],
        ['PUT', '', 'GET, POST, HEAD'],
        ['PUT', `/${created.id}`, 'GET, PATCH, DELETE, HEAD'],
        ['POST', `/${created.id}`, 'GET, PATCH, DELETE, HEAD'],
        ['GET', `/${created.id}:rotateSecret`, 'POST'],
        ['PATCH', `/${created.id}/cursor`, 'GET, PUT, HEAD'],
        ['POST', `/${created.id}/deliveries`, 'GET, HEAD'],
      ]
      for (const [method, path, allow] of cases) {
        const res = await s.hooks(method, path)
        assertProblem(res, 405, 'method_not_allowed')
        assert.equal(res.headers.get('allow'), allow, `${method} ${path}`)
      }
      assertProblem(await s.hooks('POST', `/${created.id}:pause`), 404, 'not_found')
      // An encoded colon is data: an id holding a colon, which cannot exist (POST: 405).
      assertProblem(await s.hooks('GET', `/${created.id}%3ArotateSecret`), 404, 'not_found')
    })

    it('refuses a body of another type (415), malformed or empty (400), not an object (422) or too large (413)', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      await assertHooksUnchangedBy(s, async () => {
        assertProblem(
          await s.hooks('POST', '', { body: 'url=x', contentType: 'text/plain' }),
          415,
          'unsupported_media_type',
        )
        const patch415 = await s.hooks('PATCH', `/${created.id}`, {
          body: '{}',
          contentType: 'text/plain',
        })
        assertProblem(patch415, 415, 'unsupported_media_type')
        assert.equal(
          patch415.headers.get('accept-patch'),
          'application/merge-patch+json, application/json',
        )
        assertProblem(
          await s.hooks('POST', '', { body: '{"url":', contentType: 'application/json' }),
          400,
          'bad_request',
        )
        assertProblem(
          await s.hooks('POST', '', { body: '', contentType: 'application/json' }),
          400,
          'bad_request',
        )
        assertProblem(
          await s.hooks('PUT', `/${created.id}/cursor`, {
            body: '',
            contentType: 'application/json',
          }),
          400,
          'bad_request',
        )
        assertFieldErrors(await s.hooks('POST', '', { json: ['https://a.example.com'] }), [
          { pointer: '', code: 'invalid_type' },
        ])
        assertFieldErrors(await s.hooks('POST', '', { json: null }), [
          { pointer: '', code: 'invalid_type' },
        ])
        const big = await s.hooks('POST', '', {
          json: { url: 'https://a.example.com', description: 'x'.repeat(70_000) },
        })
        assertProblem(big, 413, 'payload_too_large')
      })
    })

    it('refuses one more endpoint than WEBHOOKS_MAX with 409 webhook_limit_reached, after 422; a deletion makes room', async (t) => {
      const s = await startHooks(t, store, { webhooksMax: 3 })
      for (let i = 0; i < 3; i += 1) await s.createHook({ description: `hook ${i}` })
      await assertHooksUnchangedBy(s, async () => {
        assertProblem(
          await s.hooks('POST', '', { json: { url: 'https://a.example.com/' } }),
          409,
          'webhook_limit_reached',
        )
        // A body the rules refuse is a 422 first, as the fault order says.
        assertFieldErrors(await s.hooks('POST', '', { json: { url: 'ftp://a.example.com/' } }), [
          { pointer: '/url', code: 'invalid_format' },
        ])
      })
      const first = (await s.hooks('GET')).body as { items: Endpoint[] }
      await s.hooks('DELETE', `/${first.items[0]?.id ?? ''}`)
      await s.createHook()
    })

    it('lets exactly one of concurrent writers with the same If-Match win; the others get 412', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          i % 2 === 0
            ? s.hooks('PATCH', `/${created.id}`, {
                json: { description: `writer ${i}` },
                headers: { 'if-match': '"v1"' },
              })
            : s.hooks('POST', `/${created.id}:rotateSecret`, { headers: { 'if-match': '"v1"' } }),
        ),
      )
      const won = answers.filter((res) => res.status === 200)
      assert.equal(won.length, 1, answers.map((res) => res.status).join(' '))
      for (const res of answers.filter((one) => one.status !== 200))
        assertProblem(res, 412, 'precondition_failed')
      assert.equal(assertEndpoint(await s.hooks('GET', `/${created.id}`)).version, 2)
    })

    it('a DELETE with If-Match races PATCHes with the same If-Match: exactly one of them wins', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          // A DELETE first: its check passes, then a PATCH must not slip in before it deletes.
          i % 2 === 1
            ? s.hooks('PATCH', `/${created.id}`, {
                json: { description: `writer ${i}` },
                headers: { 'if-match': '"v1"' },
              })
            : s.hooks('DELETE', `/${created.id}`, { headers: { 'if-match': '"v1"' } }),
        ),
      )
      const won = answers.filter((res) => res.status === 200 || res.status === 204)
      assert.equal(won.length, 1, answers.map((res) => res.status).join(' '))
      for (const res of answers.filter((one) => one.status !== 200 && one.status !== 204)) {
        if (res.status === 404) assertProblem(res, 404, 'not_found')
        else assertProblem(res, 412, 'precondition_failed')
      }
      const after = await s.hooks('GET', `/${created.id}`)
      assert.equal(after.status, won[0]?.status === 204 ? 404 : 200, after.text)
    })

    it('needs webhooks:admin alone: 401 without a token, 403 with every other scope; it opens nothing else', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      const others = makeToken({ scope: 'users:read users:write users:admin events:read' })
      const routes: [string, string][] = [
        ['GET', ''],
        ['POST', ''],
        ['GET', `/${created.id}`],
        ['PATCH', `/${created.id}`],
        ['DELETE', `/${created.id}`],
        ['POST', `/${created.id}:rotateSecret`],
        ['GET', `/${created.id}/cursor`],
        ['PUT', `/${created.id}/cursor`],
        ['GET', `/${created.id}/deliveries`],
      ]
      await assertHooksUnchangedBy(s, async () => {
        for (const [method, path] of routes) {
          const json = method === 'GET' || method === 'DELETE' ? {} : { json: {} }
          const missing = await s.hooks(method, path, { ...json, token: undefined })
          assertProblem(missing, 401, 'token_missing')
          assert.match(missing.headers.get('www-authenticate') ?? '', /^Bearer realm="users"/)
          const refused = await s.hooks(method, path, { ...json, token: others })
          assertProblem(refused, 403, 'insufficient_scope')
          assert.match(refused.headers.get('www-authenticate') ?? '', /scope="webhooks:admin"/)
        }
      })
      assertProblem(await s.call('GET', '/users', { token: ADMIN }), 403, 'insufficient_scope')
      assertProblem(await s.call('GET', '/events', { token: ADMIN }), 403, 'insufficient_scope')
      assertProblem(
        await s.call('POST', '/users', {
          token: ADMIN,
          json: { email: 'a@example.com', name: 'A' },
        }),
        403,
        'insufficient_scope',
      )
      assertProblem(
        await s.call('GET', '/users:export', { token: ADMIN }),
        403,
        'insufficient_scope',
      )
    })
  })
}
