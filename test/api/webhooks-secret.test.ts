import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { assertProblem } from '../helpers/http.js'
import { assertFieldErrors } from '../helpers/users-suite.js'
import {
  assertEndpoint,
  assertHooksUnchangedBy,
  type EndpointWithSecret,
  SECRET_SHAPE,
  STORES,
  startHooks,
} from '../helpers/webhook-api.js'

const DAY_MS = 86_400_000

for (const store of STORES) {
  describe(`webhook secrets (${store.name} store)`, { skip: store.skip }, () => {
    it('shows the secret only on POST and :rotateSecret: never in GET, the list, a 4xx or a log line', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      const rotated = await s.hooks('POST', `/${created.id}:rotateSecret`)
      assert.equal(rotated.status, 200, rotated.text)
      const { secret } = rotated.json<EndpointWithSecret>()
      const secrets = [created.secret, secret]
      const texts = [
        (await s.hooks('GET', `/${created.id}`)).text,
        (await s.hooks('GET')).text,
        (await s.hooks('HEAD', `/${created.id}`)).text,
        (await s.hooks('PATCH', `/${created.id}`, { json: { description: 'x' } })).text,
        (await s.hooks('PATCH', `/${created.id}`, { json: { secret } })).text,
        (await s.hooks('GET', `/${created.id}/cursor`)).text,
        (await s.hooks('GET', `/${created.id}/deliveries`)).text,
        (await s.hooks('POST', `/${created.id}:rotateSecret`, { headers: { 'if-match': '"v1"' } }))
          .text,
        (await s.hooks('POST', '', { json: { url: 'https://a.example.com', secret } })).text,
      ]
      for (const text of texts) {
        for (const one of secrets) assert.equal(text.includes(one), false, text.slice(0, 300))
        assert.equal(text.includes('whsec_'), false, text.slice(0, 300))
      }
      // The request log lines, and every other line the service wrote.
      const lines = JSON.stringify(s.logs)
      assert.ok(s.logs.some((line) => String(line['path']).startsWith('/webhooks')))
      for (const one of secrets) {
        assert.equal(lines.includes(one), false)
        assert.equal(lines.includes(one.slice(6)), false, 'not even the base64 part')
      }
    })

    it(':rotateSecret answers 200 with a new secret and version +1; the old one signs for a day by default', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      const res = await s.hooks('POST', `/${created.id}:rotateSecret`, {
        headers: { 'if-match': '"v1"' },
      })
      const rotated = assertEndpoint(res) as EndpointWithSecret
      assert.equal(res.headers.get('cache-control'), 'no-store')
      assert.match(rotated.secret, SECRET_SHAPE)
      assert.notEqual(rotated.secret, created.secret)
      assert.equal(rotated.version, 2)
      assert.equal(
        Date.parse(rotated.previousSecretExpiresAt ?? '') - Date.parse(rotated.updatedAt),
        DAY_MS,
      )
      const stored = await s.service.store.webhooks.get(created.id)
      assert.equal(stored?.secret, rotated.secret)
      assert.equal(stored?.previousSecret, created.secret)
      const shown = assertEndpoint(await s.hooks('GET', `/${created.id}`))
      assert.equal(shown.previousSecretExpiresAt, rotated.previousSecretExpiresAt)
    })

    it('takes {} and {"overlapSeconds": n}; 0 drops the old secret at once; a rotation during an overlap drops the oldest', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      const rotate = async (json?: unknown): Promise<EndpointWithSecret> => {
        const res = await s.hooks(
          'POST',
          `/${created.id}:rotateSecret`,
          json === undefined ? {} : { json },
        )
        return assertEndpoint(res) as EndpointWithSecret
      }
      const first = await rotate({})
      const second = await rotate({ overlapSeconds: 60 })
      assert.equal(
        Date.parse(second.previousSecretExpiresAt ?? '') - Date.parse(second.updatedAt),
        60_000,
      )
      let stored = await s.service.store.webhooks.get(created.id)
      // At most two secrets: the one of the first rotation signs, the creation's is gone.
      assert.deepEqual([stored?.secret, stored?.previousSecret], [second.secret, first.secret])
      const third = await rotate({ overlapSeconds: 604_800 })
      assert.equal(
        Date.parse(third.previousSecretExpiresAt ?? '') - Date.parse(third.updatedAt),
        604_800_000,
      )
      const last = await rotate({ overlapSeconds: 0 })
      assert.equal(last.previousSecretExpiresAt, null)
      assert.equal(last.version, 5)
      stored = await s.service.store.webhooks.get(created.id)
      assert.deepEqual([stored?.secret, stored?.previousSecret], [last.secret, null])
      const all = [created.secret, first.secret, second.secret, third.secret, last.secret]
      assert.equal(new Set(all).size, all.length)
    })

    it(':rotateSecret refuses other bodies with 422, an unknown id with 404, a stale If-Match with 412', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      await assertHooksUnchangedBy(s, async () => {
        const path = `/${created.id}:rotateSecret`
        for (const [json, pointer, code] of [
          [{ overlapSeconds: -1 }, '/overlapSeconds', 'out_of_range'],
          [{ overlapSeconds: 604_801 }, '/overlapSeconds', 'out_of_range'],
          [{ overlapSeconds: 1.5 }, '/overlapSeconds', 'invalid_type'],
          [{ overlapSeconds: '60' }, '/overlapSeconds', 'invalid_type'],
          [{ overlapSeconds: null }, '/overlapSeconds', 'invalid_type'],
          // A secret in any body is read-only: the service makes every one.
          [{ secret: 'whsec_x' }, '/secret', 'read_only'],
          [[], '', 'invalid_type'],
        ] as const) {
          assertFieldErrors(await s.hooks('POST', path, { json }), [{ pointer, code }])
        }
        assertProblem(
          await s.hooks('POST', path, { body: 'x', contentType: 'text/plain' }),
          415,
          'unsupported_media_type',
        )
        assertProblem(
          await s.hooks('POST', path, { body: '{', contentType: 'application/json' }),
          400,
          'bad_request',
        )
        // 412 comes before 422.
        assertProblem(
          await s.hooks('POST', path, {
            json: { overlapSeconds: -1 },
            headers: { 'if-match': '"v2"' },
          }),
          412,
          'precondition_failed',
        )
        assertProblem(
          await s.hooks('POST', '/0193b0c4-1d2e-7f00-8a1b-2c3d4e5f6a7b:rotateSecret'),
          404,
          'not_found',
        )
      })
    })
  })
}
