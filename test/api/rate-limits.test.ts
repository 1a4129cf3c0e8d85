import assert from 'node:assert/strict'
import { rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { parseRateLimit } from 'ratelimit-header-parser'

import type { RateLimitPolicy } from '../../src/http/rate-limiter.js'
import { parseConfig } from '../../src/process/config.js'
import { RATE_LIMIT_FIELDS } from '../helpers/answer-check.js'
import { assertProblem, request, type TestResponse } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { startService, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

interface Limits {
  subject?: string
  address?: string
  trustedProxies?: readonly string[]
  maxClients?: number
  corsOrigins?: readonly string[]
}

function policy(text: string | undefined): RateLimitPolicy | undefined {
  if (text === undefined) return undefined
  const [quota = 0, windowSeconds = 0] = text.split('/').map(Number)
  return { quota, windowSeconds }
}

/** A service with the limits given and a clock the test moves (tokens are checked against it too). */
async function startLimited(t: TestContext, limits: Limits) {
  const clock = { ms: Date.now() }
  const service = await startService(t, {
    now: () => clock.ms,
    rateLimitSubject: policy(limits.subject),
    rateLimitAddress: policy(limits.address),
    ...(limits.trustedProxies === undefined ? {} : { trustedProxies: limits.trustedProxies }),
    ...(limits.maxClients === undefined ? {} : { rateLimitMaxClients: limits.maxClients }),
    ...(limits.corsOrigins === undefined ? {} : { corsOrigins: limits.corsOrigins }),
  })
  return { ...service, clock }
}

async function ready(url: string): Promise<number> {
  return (await request('GET', `${url}/readyz`)).status
}

function assertNoFields(res: TestResponse, what: string): void {
  for (const name of RATE_LIMIT_FIELDS)
    assert.equal(res.headers.get(name), null, `${what}: no ${name}`)
}

/** The fields of a counted answer, each checked against the others. */
function assertFields(
  res: TestResponse,
  expected: { policy: 'subject' | 'address'; q: number; w: number; r: number },
  nowMs: number,
  endsAtMs: number,
): void {
  const { policy: name, q, w, r } = expected
  const t = Math.max(1, Math.ceil((endsAtMs - nowMs) / 1000))
  assert.equal(res.headers.get('ratelimit-policy'), `"${name}";q=${q};w=${w}`)
  assert.equal(res.headers.get('ratelimit'), `"${name}";r=${r};t=${t}`)
  assert.equal(res.headers.get('x-ratelimit-limit'), String(q))
  assert.equal(res.headers.get('x-ratelimit-remaining'), String(r))
  assert.equal(res.headers.get('x-ratelimit-used'), String(q - r))
  assert.equal(res.headers.get('x-ratelimit-reset'), String(Math.ceil(endsAtMs / 1000)))
}

async function assertRateLimited(
  res: TestResponse,
  name: 'subject' | 'address',
  seconds: number,
): Promise<void> {
  assertProblem(res, 429, 'rate_limited')
  assert.equal(res.headers.get('content-type'), 'application/problem+json')
  assert.equal(res.headers.get('cache-control'), 'no-store')
  assert.equal(res.headers.get('retry-after'), String(seconds))
  assert.equal(res.headers.get('ratelimit'), `"${name}";r=0;t=${seconds}`)
  assert.deepEqual(res.json<{ 'violated-policies': string[] }>()['violated-policies'], [name])
}

describe('rate limits off (the default)', () => {
  it('counts nothing and adds no field', async (t) => {
    const service = await startService(t)
    const user = await service.createUser()
    for (let i = 0; i < 30; i += 1) {
      const res = await service.call('GET', `/users/${user.id}`)
      assert.equal(res.status, 200)
      assertNoFields(res, 'a read')
    }
    const anonymous = await service.call('GET', '/users', { token: undefined })
    assertProblem(anonymous, 401, 'token_missing')
    assertNoFields(anonymous, 'a 401')
  })

  it('refuses a bad setting at start, naming the variable', () => {
    const env = { JWT_SECRET: 'x'.repeat(32) }
    for (const [name, value] of [
      ['RATE_LIMIT_SUBJECT', '0/60'],
      ['RATE_LIMIT_SUBJECT', '1000001/60'],
      ['RATE_LIMIT_ADDRESS', '10/0'],
      ['RATE_LIMIT_ADDRESS', '10/86401'],
      ['RATE_LIMIT_ADDRESS', '10 per minute'],
      ['RATE_LIMIT_SUBJECT', '1.5/60'],
      ['RATE_LIMIT_MAX_CLIENTS', '0'],
      ['TRUSTED_PROXIES', '10.0.0.0/33'],
      ['TRUSTED_PROXIES', '127.0.0.1,proxy.example'],
      ['TRUSTED_PROXIES', 'fd00::/129'],
    ] as const) {
      assert.throws(
        () => parseConfig({ ...env, [name]: value }),
        (error: Error) => error.message.startsWith(name),
        `${name}=${value}`,
      )
    }
    const config = parseConfig({
      ...env,
      RATE_LIMIT_SUBJECT: '600/60',
      RATE_LIMIT_ADDRESS: 'OFF',
      RATE_LIMIT_MAX_CLIENTS: '5',
      TRUSTED_PROXIES: '10.0.0.0/8, fd00::/8,192.0.2.1',
    })
    assert.deepEqual(config.rateLimitSubject, { quota: 600, windowSeconds: 60 })
    assert.equal(config.rateLimitAddress, undefined)
    assert.equal(config.rateLimitMaxClients, 5)
    assert.deepEqual(config.trustedProxies, ['10.0.0.0/8', 'fd00::/8', '192.0.2.1'])
    const defaults = parseConfig(env)
    assert.equal(defaults.rateLimitSubject, undefined)
    assert.equal(defaults.rateLimitAddress, undefined)
    assert.equal(defaults.rateLimitMaxClients, 100_000)
    assert.deepEqual(defaults.trustedProxies, [])
  })
})

describe('per subject', () => {
  it('counts a fixed window, refuses once spent, takes nothing for a refusal, and opens a new window after', async (t) => {
    const service = await startLimited(t, { subject: '3/60' })
    const user = await service.createUser()
    const opened = service.clock.ms
    const endsAt = opened + 60_000
    // The create above took the first unit.
    for (const r of [1, 0]) {
      service.clock.ms += 1500
      const res = await service.call('GET', `/users/${user.id}`)
      assert.equal(res.status, 200)
      assertFields(res, { policy: 'subject', q: 3, w: 60, r }, service.clock.ms, endsAt)
    }
    service.clock.ms += 10_000
    const before = await service.service.store.count()
    const refused = await service.call('POST', '/users', {
      json: { email: uniqueEmail(), name: 'Refused' },
    })
    await assertRateLimited(refused, 'subject', 47)
    assertFields(refused, { policy: 'subject', q: 3, w: 60, r: 0 }, service.clock.ms, endsAt)
    assert.equal(await service.service.store.count(), before, 'a refused create stores nothing')
    // Another token of the same subject, whatever its scopes, shares the quota.
    const other = makeToken({ scope: 'users:read' })
    await assertRateLimited(
      await service.call('GET', `/users/${user.id}`, { token: other }),
      'subject',
      47,
    )
    // Another subject has its own.
    const stranger = await service.call('GET', `/users/${user.id}`, {
      token: makeToken({ sub: 'someone-else' }),
    })
    assert.equal(stranger.status, 200)
    assert.equal(stranger.headers.get('ratelimit'), '"subject";r=2;t=60')
    // The last second of the window still refuses; its end opens a new window.
    service.clock.ms = endsAt - 1
    await assertRateLimited(await service.call('GET', `/users/${user.id}`), 'subject', 1)
    service.clock.ms = endsAt
    const fresh = await service.call('GET', `/users/${user.id}`)
    assert.equal(fresh.status, 200)
    assertFields(fresh, { policy: 'subject', q: 3, w: 60, r: 2 }, endsAt, endsAt + 60_000)
  })

  it("counts every answer to a counted request: 403, a user's 404, 422", async (t) => {
    const service = await startLimited(t, { subject: '10/60' })
    const readOnly = makeToken({ scope: 'users:read' })
    const forbidden = await service.call('POST', '/users', {
      token: readOnly,
      json: { email: uniqueEmail(), name: 'X' },
    })
    assertProblem(forbidden, 403, 'insufficient_scope')
    assert.equal(forbidden.headers.get('ratelimit'), '"subject";r=9;t=60')
    const missing = await service.call('GET', '/users/0190a3c4-0000-7000-8000-000000000000')
    assertProblem(missing, 404, 'not_found')
    assert.equal(missing.headers.get('ratelimit'), '"subject";r=8;t=60')
    const invalid = await service.call('POST', '/users', { json: { email: 'no', name: '' } })
    assertProblem(invalid, 422, 'validation_failed')
    assert.equal(invalid.headers.get('ratelimit'), '"subject";r=7;t=60')
    assert.deepEqual(await service.snapshot(), [])
  })

  it("counts a deleted subject's valid token against its subject", async (t) => {
    const service = await startLimited(t, { subject: '2/60', address: '100/60' })
    const user = await service.createUser()
    const deleted = await service.call('DELETE', `/users/${user.id}`)
    assert.equal(deleted.status, 204)
    const own = makeToken({ sub: user.id })
    const first = await service.call('GET', '/users', { token: own })
    assertProblem(first, 403, 'subject_deleted')
    assert.equal(first.headers.get('ratelimit'), '"subject";r=1;t=60')
    await service.call('GET', '/users', { token: own })
    await assertRateLimited(await service.call('GET', '/users', { token: own }), 'subject', 60)
  })

  it('with the subject policy off, a valid token is not counted at all', async (t) => {
    const service = await startLimited(t, { address: '1/60' })
    for (let i = 0; i < 3; i += 1) {
      const res = await service.call('GET', '/users')
      assert.equal(res.status, 200)
      assertNoFields(res, 'a request with a valid token')
    }
  })
})

describe('per client address', () => {
  it('counts requests without a valid token, and answers 429 before 401', async (t) => {
    const service = await startLimited(t, { subject: '100/60', address: '2/60' })
    const none = await service.call('GET', '/users', { token: undefined })
    assertProblem(none, 401, 'token_missing')
    assert.equal(none.headers.get('ratelimit-policy'), '"address";q=2;w=60')
    assert.equal(none.headers.get('ratelimit'), '"address";r=1;t=60')
    const expired = makeToken({ ttl: -120 })
    const bad = await service.call('GET', '/users', { token: expired })
    assertProblem(bad, 401, 'token_expired')
    assert.equal(bad.headers.get('ratelimit'), '"address";r=0;t=60')
    await assertRateLimited(
      await service.call('GET', '/users', { token: 'not.a.token' }),
      'address',
      60,
    )
    await assertRateLimited(
      await service.call('GET', '/openapi.json', { token: undefined }),
      'address',
      60,
    )
    // A valid token counts against its subject, not the spent address.
    const valid = await service.call('GET', '/users')
    assert.equal(valid.status, 200)
    assert.equal(valid.headers.get('ratelimit'), '"subject";r=99;t=60')
  })

  it('never counts or refuses the probes, /metrics, a CORS preflight, or a route 404/405', async (t) => {
    const origin = 'http://app.example.test'
    const service = await startLimited(t, { address: '1/60', corsOrigins: [origin] })
    const uncounted = async (): Promise<void> => {
      for (const target of ['/healthz', '/readyz', '/metrics']) {
        const res = await request('GET', `${service.url}${target}`)
        assert.equal(res.status, 200, target)
        assertNoFields(res, target)
      }
      const preflight = await request('OPTIONS', `${service.baseUrl}/users`, {
        headers: { origin, 'access-control-request-method': 'POST' },
      })
      assert.equal(preflight.status, 204)
      assertNoFields(preflight, 'a preflight')
      const unknown = await request('GET', `${service.baseUrl}/nowhere`)
      assertProblem(unknown, 404, 'not_found')
      assertNoFields(unknown, 'a route 404')
      const method = await request('PUT', `${service.baseUrl}/users`)
      assertProblem(method, 405, 'method_not_allowed')
      assertNoFields(method, 'a 405')
    }
    await uncounted()
    const first = await request('GET', `${service.baseUrl}/users`, { headers: { origin } })
    assertProblem(first, 401, 'token_missing')
    assert.equal(first.headers.get('ratelimit'), '"address";r=0;t=60', 'the first counted')
    const exposed = (first.headers.get('access-control-expose-headers') ?? '').split(', ')
    for (const name of [
      'Retry-After',
      'RateLimit',
      'RateLimit-Policy',
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Used',
      'X-RateLimit-Reset',
    ]) {
      assert.ok(exposed.includes(name), `exposes ${name}`)
    }
    await assertRateLimited(await request('GET', `${service.baseUrl}/users`), 'address', 60)
    await uncounted()
  })

  it('answers 503 before 429, and a 503 refusal is not counted', async (t) => {
    const service = await startLimited(t, { address: '1/60' })
    const flag = path.join(service.dataDir, 'maintenance')
    await writeFile(flag, '')
    await waitFor('maintenance', async () =>
      (await ready(service.url)) === 503 ? true : undefined,
    )
    for (let i = 0; i < 3; i += 1) {
      const res = await request('GET', `${service.baseUrl}/users`)
      assertProblem(res, 503, 'maintenance')
      assertNoFields(res, 'a 503 before the limiter')
    }
    await rm(flag)
    await waitFor('ready', async () => ((await ready(service.url)) === 200 ? true : undefined))
    const first = await request('GET', `${service.baseUrl}/users`)
    assertProblem(first, 401, 'token_missing')
    assert.equal(first.headers.get('ratelimit'), '"address";r=0;t=60')
    await writeFile(flag, '')
    await waitFor('maintenance', async () =>
      (await ready(service.url)) === 503 ? true : undefined,
    )
    assertProblem(await request('GET', `${service.baseUrl}/users`), 503, 'maintenance')
  })

  it('reads X-Forwarded-For only from a trusted proxy: the right-most address not listed', async (t) => {
    const service = await startLimited(t, {
      address: '3/60',
      trustedProxies: ['127.0.0.1', '10.0.0.0/8', 'fd00::/8'],
    })
    const from = (xff: string | undefined): Promise<TestResponse> =>
      request('GET', `${service.baseUrl}/users`, {
        headers: xff === undefined ? {} : { 'x-forwarded-for': xff },
      })
    const remaining = async (xff: string | undefined): Promise<string | null> =>
      (await from(xff)).headers.get('x-ratelimit-remaining')
    // A client behind two proxies of ours; what it wrote itself on the left is passed over.
    assert.equal(await remaining('198.51.100.7, 10.1.2.3'), '2')
    assert.equal(await remaining('203.0.113.66, 198.51.100.7, 10.9.9.9'), '1')
    assert.equal(await remaining('198.51.100.7'), '0')
    await assertRateLimited(await from('unknown, 198.51.100.7, fd00::1'), 'address', 60)
    // Another client is another partition.
    assert.equal(await remaining('198.51.100.8, 10.1.2.3'), '2')
    // An IPv6 client counts by its /64.
    assert.equal(await remaining('2001:db8:1:2::1'), '2')
    assert.equal(await remaining('2001:db8:1:2:ffff:ffff:ffff:ffff'), '1')
    assert.equal(await remaining('[2001:db8:1:2::9]:4711'), '0')
    assert.equal(await remaining('2001:db8:1:3::1'), '2')
    // An IPv4-mapped address is its IPv4 address.
    assert.equal(await remaining('192.0.2.44'), '2')
    assert.equal(await remaining('::ffff:192.0.2.44'), '1')
    assert.equal(await remaining('192.0.2.44:5000'), '0')
    // However it is written.
    assert.equal(await remaining('192.0.2.45'), '2')
    assert.equal(await remaining('::ffff:c000:22d'), '1')
    assert.equal(await remaining('[0:0:0:0:0:ffff:192.0.2.45]'), '0')
    // Every hop trusted, or none given: the peer itself.
    assert.equal(await remaining('10.0.0.1, fd00::2'), '2')
    assert.equal(await remaining(undefined), '1')
  })

  it('reads a trusted block written in IPv4-mapped form as its IPv4 block', async (t) => {
    // ::ffff:10.0.0.0/104 is 10.0.0.0/8; the peer itself (127.0.0.1) is trusted as ::ffff:7f00:1.
    const service = await startLimited(t, {
      address: '3/60',
      trustedProxies: ['::ffff:7f00:1', '::ffff:10.0.0.0/104'],
    })
    const remaining = async (xff: string): Promise<string | null> =>
      (
        await request('GET', `${service.baseUrl}/users`, { headers: { 'x-forwarded-for': xff } })
      ).headers.get('x-ratelimit-remaining')
    assert.equal(await remaining('198.51.100.7, 10.1.2.3'), '2')
    assert.equal(await remaining('198.51.100.7, 10.200.0.1'), '1')
    // 11.0.0.1 is outside the block: it is the client.
    assert.equal(await remaining('198.51.100.7, 11.0.0.1'), '2')
    assert.throws(
      () => parseConfig({ JWT_SECRET: 'x'.repeat(32), TRUSTED_PROXIES: '::ffff:10.0.0.0/95' }),
      /TRUSTED_PROXIES.*96 to 128/,
    )
  })

  it('ignores X-Forwarded-For from a peer that is not a trusted proxy', async (t) => {
    const service = await startLimited(t, { address: '2/60', trustedProxies: ['10.0.0.0/8'] })
    const from = (xff: string): Promise<TestResponse> =>
      request('GET', `${service.baseUrl}/users`, { headers: { 'x-forwarded-for': xff } })
    assert.equal((await from('198.51.100.1')).headers.get('x-ratelimit-remaining'), '1')
    assert.equal((await from('198.51.100.2')).headers.get('x-ratelimit-remaining'), '0')
    const refused = await from('198.51.100.3')
    await assertRateLimited(refused, 'address', 60)
    assert.equal(
      refused.json<{ detail: string }>().detail,
      "This address's quota of 2 requests per 60 s is spent; try again in 60 s.",
    )
  })

  it('passes over X-Forwarded-For entries that are not addresses, wherever they stand', async (t) => {
    const service = await startLimited(t, {
      address: '3/60',
      trustedProxies: ['127.0.0.1', '10.0.0.0/8'],
    })
    const remaining = async (xff: string): Promise<string | null> =>
      (
        await request('GET', `${service.baseUrl}/users`, { headers: { 'x-forwarded-for': xff } })
      ).headers.get('x-ratelimit-remaining')
    assert.equal(await remaining('198.51.100.9, unknown, 10.1.2.3'), '2')
    // An IPv6 address whose bracket is never closed is no address either.
    assert.equal(await remaining('198.51.100.9, [2001:db8:1:2::1'), '1')
    assert.equal(await remaining('198.51.100.9, a:b:c, 10.1.2.3'), '0')
  })
})

describe('a wall clock set back', () => {
  it('lengthens no window: a spent one still ends W seconds after it opened', async (t) => {
    const service = await startLimited(t, { address: '2/60' })
    const anonymous = () => request('GET', `${service.baseUrl}/openapi.json`)
    assert.equal((await anonymous()).status, 200)
    service.clock.ms += 10_000
    assert.equal((await anonymous()).status, 200)
    // An NTP step or a restored virtual machine sets the clock back an hour.
    service.clock.ms -= 3_600_000
    const refused = await anonymous()
    await assertRateLimited(refused, 'address', 50)
    assert.equal(
      refused.headers.get('x-ratelimit-reset'),
      String(Math.ceil((service.clock.ms + 50_000) / 1000)),
    )
    service.clock.ms += 50_000
    const fresh = await anonymous()
    assert.equal(fresh.status, 200)
    assert.equal(fresh.headers.get('ratelimit'), '"address";r=1;t=60')
  })
})

describe('a client reading the fields', () => {
  it("ratelimit-header-parser reads GitHub's X-RateLimit-* form as the service meant it", async (t) => {
    const service = await startLimited(t, { subject: '5/30' })
    const endsAt = service.clock.ms + 30_000
    let res = await service.call('GET', '/users')
    for (let i = 0; i < 4; i += 1) res = await service.call('GET', '/users')
    // The parser reads the combined RateLimit field as draft 7 wrote it; the draft this service
    // follows changed that field, so the client is given the X-RateLimit-* fields it knows.
    const github = Object.fromEntries(
      [...res.headers].filter(([name]) => name.startsWith('x-ratelimit-')),
    )
    const parsed = parseRateLimit(github)
    assert.deepEqual(parsed, {
      limit: 5,
      used: 5,
      remaining: 0,
      reset: new Date(Math.ceil(endsAt / 1000) * 1000),
    })
    const refused = await service.call('GET', '/users')
    assert.equal(refused.status, 429)
    const again = parseRateLimit(
      Object.fromEntries([...refused.headers].filter(([name]) => name.startsWith('x-ratelimit-'))),
    )
    assert.equal(again?.remaining, 0)
    assert.equal(again?.reset?.getTime(), Math.ceil(endsAt / 1000) * 1000)
  })
})

describe('an event stream', () => {
  it('counts once, when it opens', async (t) => {
    const service = await startLimited(t, { subject: '5/60' })
    const controller = new AbortController()
    const reader = makeToken({ scope: 'events:read' })
    const stream = await fetch(`${service.baseUrl}/events`, {
      headers: { authorization: `Bearer ${reader}`, accept: 'text/event-stream' },
      signal: controller.signal,
    })
    t.after(() => controller.abort())
    assert.equal(stream.status, 200)
    assert.equal(stream.headers.get('ratelimit'), '"subject";r=4;t=60')
    assert.equal(stream.headers.get('x-ratelimit-used'), '1')
    await service.createUser()
    const body = stream.body?.getReader()
    assert.ok(body)
    let text = ''
    while (!text.includes('user.created')) {
      const { value, done } = await body.read()
      assert.equal(done, false)
      text += Buffer.from(value ?? new Uint8Array()).toString('utf8')
    }
    const next = await service.call('GET', '/users')
    assert.equal(next.headers.get('ratelimit'), '"subject";r=2;t=60')
    controller.abort()
  })
})
