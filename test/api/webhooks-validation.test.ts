import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { assertFieldErrors } from '../helpers/users-suite.js'
import {
  assertEndpoint,
  assertHooksUnchangedBy,
  STORES,
  startHooks,
} from '../helpers/webhook-api.js'

type Case = [body: Record<string, unknown>, pointer: string, code: string]

/** Bodies a create refuses, each with the one field error it gets. */
const CREATE_REFUSALS: readonly Case[] = [
  [{}, '/url', 'required'],
  [{ url: null }, '/url', 'required'],
  [{ url: '' }, '/url', 'required'],
  [{ url: 42 }, '/url', 'invalid_type'],
  [{ url: 'hooks.example.com/users' }, '/url', 'invalid_format'],
  [{ url: '/relative/path' }, '/url', 'invalid_format'],
  [{ url: 'ftp://hooks.example.com/' }, '/url', 'invalid_format'],
  [{ url: 'javascript:alert(1)' }, '/url', 'invalid_format'],
  [{ url: 'https://' }, '/url', 'invalid_format'],
  [{ url: 'https://user:pw@hooks.example.com/' }, '/url', 'invalid_format'],
  [{ url: 'https://user@hooks.example.com/' }, '/url', 'invalid_format'],
  [{ url: 'https://:pw@hooks.example.com/' }, '/url', 'invalid_format'],
  [{ url: 'https://hooks.example.com/#frag' }, '/url', 'invalid_format'],
  [{ url: 'https://hooks.example.com/#' }, '/url', 'invalid_format'],
  [{ url: ' https://hooks.example.com/' }, '/url', 'invalid_characters'],
  [{ url: 'https://hooks.example.com/a\tb' }, '/url', 'invalid_characters'],
  [{ url: 'https://hooks.example.com/a b' }, '/url', 'invalid_characters'],
  [{ url: 'https://hooks.example.com/\u0085' }, '/url', 'invalid_characters'],
  [{ url: 'https://hooks.example.com/\ud800' }, '/url', 'invalid_characters'],
  [{ url: `https://hooks.example.com/${'a'.repeat(2048)}` }, '/url', 'too_long'],
  // 2,049 characters (code points), 4,072 UTF-16 units.
  [{ url: `https://hooks.example.com/${'😀'.repeat(2049 - 26)}` }, '/url', 'too_long'],
  [{ url: 'https://a.example.com', eventTypes: [] }, '/eventTypes', 'too_short'],
  [
    {
      url: 'https://a.example.com',
      eventTypes: [
        'user.created',
        'user.updated',
        'user.activated',
        'user.suspended',
        'user.deleted',
        'user.tokens_revoked',
      ],
    },
    '/eventTypes',
    'too_long',
  ],
  [{ url: 'https://a.example.com', eventTypes: 'user.created' }, '/eventTypes', 'invalid_type'],
  [
    { url: 'https://a.example.com', eventTypes: ['user.renamed'] },
    '/eventTypes/0',
    'invalid_value',
  ],
  [
    { url: 'https://a.example.com', eventTypes: ['user.created', 7] },
    '/eventTypes/1',
    'invalid_type',
  ],
  [
    { url: 'https://a.example.com', eventTypes: ['user.created', 'user.created'] },
    '/eventTypes/1',
    'duplicate_value',
  ],
  [{ url: 'https://a.example.com', description: 'x'.repeat(201) }, '/description', 'too_long'],
  [{ url: 'https://a.example.com', description: 'a\u0007b' }, '/description', 'invalid_characters'],
  [{ url: 'https://a.example.com', description: 'a\u007fb' }, '/description', 'invalid_characters'],
  [
    { url: 'https://a.example.com', description: '\u200b\u200d' },
    '/description',
    'invalid_characters',
  ],
  [{ url: 'https://a.example.com', description: 'x\udc00' }, '/description', 'invalid_characters'],
  [{ url: 'https://a.example.com', description: null }, '/description', 'invalid_type'],
  [{ url: 'https://a.example.com', enabled: 'yes' }, '/enabled', 'invalid_type'],
  [{ url: 'https://a.example.com', enabled: null }, '/enabled', 'invalid_type'],
  [{ url: 'https://a.example.com', secret: 'whsec_mine' }, '/secret', 'read_only'],
  [
    { url: 'https://a.example.com', id: '0193b0c4-1d2e-7f00-8a1b-2c3d4e5f6a7b' },
    '/id',
    'read_only',
  ],
  [{ url: 'https://a.example.com', version: 1 }, '/version', 'read_only'],
  [{ url: 'https://a.example.com', disabledReason: null }, '/disabledReason', 'read_only'],
  [
    { url: 'https://a.example.com', previousSecretExpiresAt: null },
    '/previousSecretExpiresAt',
    'read_only',
  ],
  [
    { url: 'https://a.example.com', createdAt: '2026-01-01T00:00:00.000Z' },
    '/createdAt',
    'read_only',
  ],
  [{ url: 'https://a.example.com', colour: 'red' }, '/colour', 'unknown_field'],
  [{ url: 'https://a.example.com', __proto__x: 1 }, '/__proto__x', 'unknown_field'],
]

/**
 * Hosts that are refused addresses (or localhost) in the spellings the WHATWG parser accepts:
 * each is 422 private_address without WEBHOOK_ALLOW_NETWORKS.
 */
export const PRIVATE_HOSTS: readonly string[] = [
  '127.0.0.1',
  '127.1',
  '2130706433',
  '0x7f.0.0.1',
  '0177.0.0.1',
  '0x7f000001',
  '[::1]',
  '[::ffff:127.0.0.1]',
  '[::ffff:7f00:1]',
  '[0:0:0:0:0:ffff:10.0.0.1]',
  '0.0.0.0',
  '0',
  '[::]',
  '10.0.0.1',
  '172.16.0.1',
  '172.31.255.255',
  '192.168.1.1',
  '169.254.169.254',
  '[fe80::1]',
  '[fc00::1]',
  '[fd12:3456::1]',
  '100.64.0.1',
  '198.18.0.1',
  '192.0.2.1',
  '198.51.100.7',
  '203.0.113.9',
  '[2001:db8::1]',
  '224.0.0.1',
  '[ff02::1]',
  '240.0.0.1',
  '255.255.255.255',
  'localhost',
  'LOCALHOST',
  'api.localhost',
  'localhost.',
]

for (const store of STORES) {
  describe(`webhook endpoint rules (${store.name} store)`, { skip: store.skip }, () => {
    it('refuses each malformed create with 422 naming the field, and stores nothing', async (t) => {
      const s = await startHooks(t, store)
      await s.createHook()
      await assertHooksUnchangedBy(s, async () => {
        for (const [body, pointer, code] of CREATE_REFUSALS) {
          const res = await s.hooks('POST', '', { json: body })
          assertFieldErrors(res, [{ pointer, code }])
        }
      })
    })

    it('refuses a url whose host is a private address in any spelling, or localhost (private_address)', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      await assertHooksUnchangedBy(s, async () => {
        for (const host of PRIVATE_HOSTS) {
          for (const scheme of ['http', 'https']) {
            const url = `${scheme}://${host}:8080/hook`
            const res = await s.hooks('POST', '', { json: { url } })
            assertFieldErrors(res, [{ pointer: '/url', code: 'private_address' }])
            const patch = await s.hooks('PATCH', `/${created.id}`, { json: { url } })
            assertFieldErrors(patch, [{ pointer: '/url', code: 'private_address' }])
          }
        }
      })
    })

    it('takes public hosts, IPv6 and IPv4 literals that are global, and any port, path and query', async (t) => {
      const s = await startHooks(t, store)
      for (const url of [
        'https://hooks.example.com',
        'http://8.8.8.8:9000/x?y=1&z=%20',
        'https://[2606:4700:4700::1111]/hook',
        'HTTPS://Hooks.Example.COM/Path?Q=1',
        `https://hooks.example.com/${'a'.repeat(2048 - 'https://hooks.example.com/'.length)}`,
        // 2,048 characters (code points), as maxLength counts them, in 4,070 UTF-16 units.
        `https://hooks.example.com/${'😀'.repeat(2048 - 'https://hooks.example.com/'.length)}`,
      ]) {
        const created = await s.createHook({ url })
        assert.equal(created.url, url, 'the url is kept as given')
      }
    })

    it('takes WEBHOOK_ALLOW_NETWORKS: an allowed block is registered, others still refused', async (t) => {
      const s = await startHooks(t, store, {
        webhookAllowNetworks: ['127.0.0.0/8', '10.20.0.0/16'],
      })
      for (const url of ['http://127.0.0.1:9/x', 'http://10.20.3.4/', 'http://localhost:8/']) {
        const created = await s.createHook({ url })
        assert.equal(created.url, url)
      }
      await assertHooksUnchangedBy(s, async () => {
        for (const url of ['http://10.21.0.1/', 'http://192.168.0.1/', 'http://[::1]/']) {
          const res = await s.hooks('POST', '', { json: { url } })
          assertFieldErrors(res, [{ pointer: '/url', code: 'private_address' }])
        }
      })
    })

    it('PATCH: null url is required, output-only fields pass when equal and are read_only otherwise', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      await assertHooksUnchangedBy(s, async () => {
        const cases: Case[] = [
          [{ url: null }, '/url', 'required'],
          [{ version: 2 }, '/version', 'read_only'],
          [{ disabledReason: 'manual' }, '/disabledReason', 'read_only'],
          [{ createdAt: '2020-01-01T00:00:00.000Z' }, '/createdAt', 'read_only'],
          [{ id: '0193b0c4-1d2e-7f00-8a1b-2c3d4e5f6a7b' }, '/id', 'read_only'],
          [{ secret: created.secret }, '/secret', 'read_only'],
          [{ eventTypes: ['user.created', 'user.created'] }, '/eventTypes/1', 'duplicate_value'],
          [{ enabled: 1 }, '/enabled', 'invalid_type'],
          [{ unknown: true }, '/unknown', 'unknown_field'],
        ]
        for (const [body, pointer, code] of cases) {
          const res = await s.hooks('PATCH', `/${created.id}`, { json: body })
          assertFieldErrors(res, [{ pointer, code }])
        }
        const many = await s.hooks('PATCH', `/${created.id}`, {
          json: { url: 'x', description: 1, enabled: 'no', secret: 's', version: 9 },
        })
        assertFieldErrors(many, [
          { pointer: '/url', code: 'invalid_format' },
          { pointer: '/description', code: 'invalid_type' },
          { pointer: '/enabled', code: 'invalid_type' },
          { pointer: '/secret', code: 'read_only' },
          { pointer: '/version', code: 'read_only' },
        ])
      })
      const { secret: _secret, ...echo } = created
      const same = await s.hooks('PATCH', `/${created.id}`, { json: echo })
      assert.equal(assertEndpoint(same).version, 1, 'echoing GET changes nothing')
    })

    it('answers 404 before 412 before 422 on PATCH', async (t) => {
      const s = await startHooks(t, store)
      const created = await s.createHook()
      await assertHooksUnchangedBy(s, async () => {
        const bad = { json: { url: 'ftp://x' }, headers: { 'if-match': '"v9"' } }
        const missing = await s.hooks('PATCH', '/0193b0c4-1d2e-7f00-8a1b-2c3d4e5f6a7b', bad)
        assert.equal(missing.status, 404)
        const stale = await s.hooks('PATCH', `/${created.id}`, bad)
        assert.equal(stale.status, 412)
        const invalid = await s.hooks('PATCH', `/${created.id}`, {
          ...bad,
          headers: { 'if-match': '"v1"' },
        })
        assertFieldErrors(invalid, [{ pointer: '/url', code: 'invalid_format' }])
      })
    })
  })
}
