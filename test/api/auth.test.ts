import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import type { UserServiceOptions } from '../../src/process/create-user-service.js'
import {
  assertInsufficientScope,
  assertUnauthorized,
  b64url,
  flipChar,
  nonCanonical,
  partIndexes,
  RFC7515_EXP,
  RFC7515_K,
  RFC7515_TOKEN,
  signParts,
  signText,
} from '../helpers/auth-tokens.js'
import { assertProblem, type TestResponse } from '../helpers/http.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { makeToken, nowSeconds, signJwt, TEST_SECRET } from '../helpers/tokens.js'

const OTHER_SECRET = 'another-secret-that-is-also-32-bytes-long'
const UNKNOWN_ID = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'
const ISSUER = 'https://issuer.example'
const AUDIENCE = 'users-api'

type Scope = 'users:read' | 'users:write' | 'users:admin'
const SCOPE_LIST: readonly Scope[] = ['users:read', 'users:write', 'users:admin']

interface RouteCase {
  name: string
  method: string
  scope: Scope
  ok: number
  path(id: string): string
  body?: () => Record<string, unknown>
  /** The addressed user must be active for the call to succeed. */
  active?: boolean
}

/** Every /users route with the scope §3 gives it. */
const ROUTES: readonly RouteCase[] = [
  { name: 'GET /users', method: 'GET', scope: 'users:read', ok: 200, path: () => '/users' },
  {
    name: 'GET /users/{id}',
    method: 'GET',
    scope: 'users:read',
    ok: 200,
    path: (id) => `/users/${id}`,
  },
  {
    name: 'POST /users',
    method: 'POST',
    scope: 'users:write',
    ok: 201,
    path: () => '/users',
    body: () => ({ email: uniqueEmail(), name: 'Created' }),
  },
  {
    name: 'PUT /users/{id}',
    method: 'PUT',
    scope: 'users:write',
    ok: 200,
    path: (id) => `/users/${id}`,
    body: () => ({ email: uniqueEmail(), name: 'Replaced' }),
  },
  {
    name: 'PATCH /users/{id}',
    method: 'PATCH',
    scope: 'users:write',
    ok: 200,
    path: (id) => `/users/${id}`,
    body: () => ({ name: 'Patched' }),
  },
  {
    name: 'DELETE /users/{id}',
    method: 'DELETE',
    scope: 'users:write',
    ok: 204,
    path: (id) => `/users/${id}`,
  },
  {
    name: 'POST /users/{id}:activate',
    method: 'POST',
    scope: 'users:admin',
    ok: 200,
    path: (id) => `/users/${id}:activate`,
  },
  {
    name: 'POST /users/{id}:suspend',
    method: 'POST',
    scope: 'users:admin',
    ok: 200,
    path: (id) => `/users/${id}:suspend`,
    active: true,
  },
]

/** Calls a route on user `id` with a token (or none when undefined). */
function callRoute(
  s: TestService,
  route: RouteCase,
  id: string,
  token: string | undefined,
): Promise<TestResponse> {
  return s.call(route.method, route.path(id), { token, json: route.body?.() })
}

/** A user the route can act on with success: pending, or active when the route needs it. */
async function prepareUser(s: TestService, route: RouteCase): Promise<User> {
  const user = await s.createUser()
  if (route.active === true)
    assert.equal((await s.call('POST', `/users/${user.id}:activate`)).status, 200)
  return user
}

interface RefusalCase {
  name: string
  token: () => string
  code: 'token_invalid' | 'token_expired'
  options?: Partial<UserServiceOptions>
}

const HEADER = b64url('{"alg":"HS256","typ":"JWT"}')
const payload = (claims: Record<string, unknown> = {}): string => {
  const now = nowSeconds()
  return b64url(
    JSON.stringify({
      sub: 'tester',
      iat: now,
      exp: now + 300,
      scope: 'users:read users:write',
      ...claims,
    }),
  )
}
/** The three parts of a valid token. */
const parts = (): [string, string, string] => {
  const [h = '', p = '', sig = ''] = makeToken().split('.')
  return [h, p, sig]
}
const withKids = { secrets: { k1: TEST_SECRET, k2: OTHER_SECRET } }
const withIssuer = { issuer: ISSUER, audience: AUDIENCE }

function invalid(
  name: string,
  token: () => string,
  options?: Partial<UserServiceOptions>,
): RefusalCase {
  return { name, token, code: 'token_invalid', ...(options === undefined ? {} : { options }) }
}

function expired(
  name: string,
  token: () => string,
  options?: Partial<UserServiceOptions>,
): RefusalCase {
  return { name, token, code: 'token_expired', ...(options === undefined ? {} : { options }) }
}

/** Every refusal reason of verifyToken, as a token the service must refuse. */
const REFUSALS: readonly RefusalCase[] = [
  invalid('malformed: two parts', () => parts().slice(0, 2).join('.')),
  invalid('malformed: four parts', () => `${makeToken()}.abc`),
  invalid('malformed: an empty signature', () => `${parts()[0]}.${parts()[1]}.`),
  invalid('malformed: an empty header', () => `.${parts()[1]}.${parts()[2]}`),
  invalid('malformed: padding', () => `${makeToken()}=`),
  invalid('malformed: a stray character', () => {
    const [h, p, sig] = parts()
    return `${h}.${p}.${sig.slice(0, 5)}+${sig.slice(6)}`
  }),
  invalid('malformed: a non-canonical signature', () => {
    const [h, p, sig] = parts()
    return `${h}.${p}.${nonCanonical(sig)}`
  }),
  invalid('bad_header: not JSON', () => signText('{"alg":"HS256"', '{"sub":"tester"}')),
  invalid('bad_header: not an object', () => signParts(b64url('["HS256"]'), payload())),
  invalid('bad_header: a kid that is not a string', () => makeToken({ header: { kid: 7 } })),
  invalid('bad_header: crit', () => makeToken({ header: { crit: ['exp'] } })),
  invalid('unsupported_alg: none', () =>
    signParts(b64url('{"alg":"none","typ":"JWT"}'), payload()),
  ),
  invalid(
    'unsupported_alg: none without a signature',
    () => `${b64url('{"alg":"none"}')}.${payload()}.`,
  ),
  invalid('unsupported_alg: RS256', () => makeToken({ header: { alg: 'RS256' } })),
  invalid('unsupported_alg: ES256', () => makeToken({ header: { alg: 'ES256' } })),
  invalid('unsupported_alg: no alg', () => signParts(b64url('{"typ":"JWT"}'), payload())),
  invalid('unsupported_alg: hs256 in lower case', () => makeToken({ header: { alg: 'hs256' } })),
  invalid('unknown_kid', () => makeToken({ header: { kid: 'k3' } }), withKids),
  invalid('bad_signature: one changed character', () => {
    const text = makeToken()
    return flipChar(text, text.length - 5)
  }),
  invalid('bad_signature: another secret', () => makeToken({ secret: OTHER_SECRET })),
  invalid('bad_signature: HS256 header over an HS512 signature', () =>
    signParts(HEADER, payload(), TEST_SECRET, 'HS512'),
  ),
  invalid(
    'bad_signature: the kid names the other key',
    () => makeToken({ secret: OTHER_SECRET, header: { kid: 'k1' } }),
    withKids,
  ),
  invalid('repeated_name: alg twice in the header', () =>
    signParts(b64url('{"alg":"HS256","alg":"HS256"}'), payload()),
  ),
  invalid('repeated_name: sub twice in the payload', () => {
    const now = nowSeconds()
    const text = `{"sub":"tester","sub":"admin","iat":${now},"exp":${now + 300},"scope":"users:read users:write"}`
    return signParts(HEADER, b64url(text))
  }),
  invalid('bad_payload: not JSON', () => signParts(HEADER, b64url('{"sub":'))),
  invalid('bad_payload: an array', () => signParts(HEADER, b64url('[]'))),
  expired('expired', () => makeToken({ nowS: nowSeconds() - 3600, ttl: 60 })),
  expired('expired: just past the 30 s leeway', () => makeToken({ nowS: nowSeconds() - 300 - 32 })),
  expired(
    'expired, with no sub, a wrong iss and aud and nbf in the future',
    () =>
      makeToken({
        nowS: nowSeconds() - 3600,
        ttl: 60,
        sub: undefined,
        claims: { iss: 'elsewhere', aud: 'others', nbf: nowSeconds() + 3600 },
      }),
    withIssuer,
  ),
  invalid('missing_exp', () => makeToken({ claims: { exp: undefined } })),
  invalid('missing_exp: a string', () => makeToken({ claims: { exp: String(nowSeconds() + 60) } })),
  invalid('not_yet_valid', () => makeToken({ claims: { nbf: nowSeconds() + 120 } })),
  invalid('issued_in_future', () => makeToken({ claims: { iat: nowSeconds() + 120 } })),
  invalid('missing_sub', () => makeToken({ sub: undefined })),
  invalid('missing_sub: empty', () => makeToken({ sub: '' })),
  invalid(
    'wrong_issuer',
    () => makeToken({ claims: { iss: 'https://evil.example', aud: AUDIENCE } }),
    withIssuer,
  ),
  invalid('wrong_issuer: missing', () => makeToken({ claims: { aud: AUDIENCE } }), withIssuer),
  invalid(
    'wrong_audience: a string',
    () => makeToken({ claims: { iss: ISSUER, aud: 'others' } }),
    withIssuer,
  ),
  invalid(
    'wrong_audience: an array',
    () => makeToken({ claims: { iss: ISSUER, aud: ['others', 'more'] } }),
    withIssuer,
  ),
  invalid('wrong_audience: missing', () => makeToken({ claims: { iss: ISSUER } }), withIssuer),
  invalid('bad_scope', () =>
    makeToken({ scope: null, claims: { scope: ['users:read', 'users:write'] } }),
  ),
]

/** A token the service accepts for the options of a refusal case (to prove the service works). */
function goodToken(options: Partial<UserServiceOptions> | undefined): string {
  return options === withIssuer
    ? makeToken({ claims: { iss: ISSUER, aud: AUDIENCE } })
    : makeToken()
}

describe('401: refused tokens', () => {
  for (const refusal of REFUSALS) {
    it(`answers ${refusal.code} for ${refusal.name}, and changes nothing`, async (t) => {
      const s = await startService(t, refusal.options)
      const admin = goodToken(refusal.options)
      const existing = await s.call('POST', '/users', {
        token: admin,
        json: { email: uniqueEmail(), name: 'Existing' },
      })
      assert.equal(existing.status, 201, existing.text)
      const before = await s.call('GET', '/users', { token: admin })
      const token = refusal.token()
      assertUnauthorized(await s.call('GET', '/users', { token }), refusal.code, token)
      assertUnauthorized(
        await s.call('POST', '/users', { token, json: { email: uniqueEmail(), name: 'Refused' } }),
        refusal.code,
        token,
      )
      assertUnauthorized(
        await s.call('DELETE', `/users/${existing.json<User>().id}`, { token }),
        refusal.code,
        token,
      )
      const after = await s.call('GET', '/users', { token: admin })
      assert.equal(after.status, 200)
      assert.deepEqual(after.body, before.body)
      assert.ok(!JSON.stringify(s.logs).includes(token), 'the token shows in the logs')
    })
  }
})

describe('401: token_missing', () => {
  it('answers token_missing without error= for no header, another scheme or an empty bearer token', async (t) => {
    const s = await startService(t)
    const before = await s.snapshot()
    const headers: (Record<string, string> | undefined)[] = [
      undefined,
      { authorization: 'Basic dXNlcjpwYXNzd29yZA==' },
      { authorization: `Token ${s.token}` },
      { authorization: 'Bearer' },
      { authorization: 'Bearer    ' },
      { authorization: 'bearer' },
      { authorization: '' },
    ]
    for (const header of headers) {
      const calls = [
        { method: 'GET' },
        { method: 'POST', json: { email: uniqueEmail(), name: 'Anonymous' } },
        { method: 'HEAD' },
      ]
      for (const { method, json } of calls) {
        const res = await s.call(method, '/users', {
          token: undefined,
          json,
          ...(header === undefined ? {} : { headers: header }),
        })
        if (method === 'HEAD') {
          assert.equal(res.status, 401, `${JSON.stringify(header)} HEAD`)
          assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="users"')
          continue
        }
        assertUnauthorized(res, 'token_missing')
        assert.equal(
          res.headers.get('www-authenticate'),
          'Bearer realm="users"',
          JSON.stringify(header),
        )
      }
    }
    assert.deepEqual(await s.snapshot(), before)
  })

  it('reads the Bearer scheme case-insensitively', async (t) => {
    const s = await startService(t)
    const res = await s.call('GET', '/users', {
      token: undefined,
      headers: { authorization: `bEARER ${s.token}` },
    })
    assert.equal(res.status, 200, res.text)
  })

  it('treats anything after Bearer as a token: a token with a space is token_invalid', async (t) => {
    const s = await startService(t)
    const res = await s.call('GET', '/users', {
      token: undefined,
      headers: { authorization: `Bearer ${s.token} extra` },
    })
    assertUnauthorized(res, 'token_invalid', s.token)
  })
})

describe('authentication before the user lookup', () => {
  for (const route of ROUTES) {
    it(`${route.name} answers 401 for an unknown or malformed id without a valid token`, async (t) => {
      const s = await startService(t)
      for (const id of [UNKNOWN_ID, 'not-a-uuid']) {
        assertUnauthorized(await callRoute(s, route, id, undefined), 'token_missing')
        const forged = makeToken({ secret: OTHER_SECRET })
        assertUnauthorized(await callRoute(s, route, id, forged), 'token_invalid', forged)
        const expired = makeToken({ nowS: nowSeconds() - 3600 })
        assertUnauthorized(await callRoute(s, route, id, expired), 'token_expired', expired)
      }
      if (route.path(UNKNOWN_ID).includes(UNKNOWN_ID)) {
        assertProblem(await callRoute(s, route, UNKNOWN_ID, s.token), 404, 'not_found')
      }
    })
  }

  it('answers 401 and 403 before looking at the body', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const before = await s.snapshot()
    const bodies = [
      { body: 'not json', contentType: 'application/json' },
      { body: '{"email":"x@example.com","name":"X"}', contentType: 'text/plain' },
    ]
    for (const body of bodies) {
      assertUnauthorized(
        await s.call('POST', '/users', { token: undefined, ...body }),
        'token_missing',
      )
      assertUnauthorized(
        await s.call('PATCH', `/users/${UNKNOWN_ID}`, { token: undefined, ...body }),
        'token_missing',
      )
      assertInsufficientScope(
        await s.call('POST', '/users', { token: makeToken({ scope: 'users:read' }), ...body }),
        'users:write',
      )
      assertInsufficientScope(
        await s.call('PUT', `/users/${user.id}`, {
          token: makeToken({ scope: 'users:admin' }),
          ...body,
        }),
        'users:write',
      )
    }
    assert.deepEqual(await s.snapshot(), before)
  })

  it('needs no token for /healthz, /readyz and /openapi.json', async (t) => {
    const s = await startService(t)
    for (const path of ['/healthz', '/readyz', '/openapi.json']) {
      const res = await s.call('GET', `${s.url}${path}`, { token: undefined })
      assert.equal(res.status, 200, path)
    }
  })
})

describe('403: scopes', () => {
  for (const route of ROUTES) {
    it(`${route.name} needs ${route.scope}, refuses the other scopes and no scope, and accepts its scope alone`, async (t) => {
      const s = await startService(t)
      const user = await prepareUser(s, route)
      const before = await s.snapshot()
      for (const other of SCOPE_LIST.filter((scope) => scope !== route.scope)) {
        assertInsufficientScope(
          await callRoute(s, route, user.id, makeToken({ scope: other })),
          route.scope,
        )
      }
      const others = SCOPE_LIST.filter((scope) => scope !== route.scope).join(' ')
      assertInsufficientScope(
        await callRoute(s, route, user.id, makeToken({ scope: others })),
        route.scope,
      )
      for (const scope of [
        null,
        '',
        route.scope.toUpperCase(),
        `${route.scope}x`,
        SCOPE_LIST.join(','),
      ] as const) {
        assertInsufficientScope(
          await callRoute(s, route, user.id, makeToken({ scope })),
          route.scope,
        )
      }
      assert.deepEqual(await s.snapshot(), before, 'a refused call changed the data')
      const res = await callRoute(s, route, user.id, makeToken({ scope: route.scope }))
      assert.equal(res.status, route.ok, res.text)
    })
  }

  it('the refusal names the needed scope in WWW-Authenticate with the realm', async (t) => {
    const s = await startService(t)
    const res = await s.call('GET', '/users', { token: makeToken({ scope: 'users:write' }) })
    assertProblem(res, 403, 'insufficient_scope')
    assert.equal(
      res.headers.get('www-authenticate'),
      'Bearer realm="users", error="insufficient_scope", scope="users:read"',
    )
    assert.equal(res.headers.get('cache-control'), 'no-store')
  })
})

describe('403: subject_suspended', () => {
  it('refuses every /users route to a token whose sub is a suspended user, until :activate', async (t) => {
    const s = await startService(t)
    const subject = await s.createUser()
    assert.equal((await s.call('POST', `/users/${subject.id}:activate`)).status, 200)
    assert.equal((await s.call('POST', `/users/${subject.id}:suspend`)).status, 200)
    const target = await s.createUser()
    const token = makeToken({ sub: subject.id })
    const before = await s.snapshot()
    for (const route of ROUTES) {
      for (const id of [target.id, subject.id, UNKNOWN_ID]) {
        const res = await callRoute(s, route, id, token)
        assertProblem(res, 403, 'subject_suspended')
        assert.equal(res.headers.get('cache-control'), 'no-store')
      }
    }
    assert.deepEqual(await s.snapshot(), before, 'a refused call changed the data')

    assert.equal((await s.call('POST', `/users/${subject.id}:activate`)).status, 200)
    for (const route of ROUTES) {
      const user = await prepareUser(s, route)
      const res = await callRoute(s, route, user.id, token)
      assert.equal(res.status, route.ok, `${route.name}: ${res.text}`)
    }

    // Suspended again: refused again at once (the suspension is not cached with the token).
    assert.equal((await s.call('POST', `/users/${subject.id}:suspend`)).status, 200)
    assertProblem(await s.call('GET', '/users', { token }), 403, 'subject_suspended')
  })

  it("lets a pending or active user's token through", async (t) => {
    const s = await startService(t)
    const pending = await s.createUser()
    const active = await s.createUser()
    assert.equal((await s.call('POST', `/users/${active.id}:activate`)).status, 200)
    for (const user of [pending, active]) {
      const res = await s.call('GET', `/users/${user.id}`, {
        token: makeToken({ sub: user.id, scope: 'users:read' }),
      })
      assert.equal(res.status, 200, res.text)
    }
  })
})

describe('403: subject_deleted', () => {
  it('refuses every /users route to the token of a suspended-then-deleted user, also after a restart', async (t) => {
    const first = await startService(t)
    const subject = await first.createUser()
    assert.equal((await first.call('POST', `/users/${subject.id}:activate`)).status, 200)
    assert.equal((await first.call('POST', `/users/${subject.id}:suspend`)).status, 200)
    const token = makeToken({ sub: subject.id })
    assertProblem(await first.call('GET', '/users', { token }), 403, 'subject_suspended')
    assert.equal((await first.call('DELETE', `/users/${subject.id}`)).status, 204)
    const target = await first.createUser()
    const before = await first.snapshot()
    for (const route of ROUTES) {
      for (const id of [target.id, subject.id, UNKNOWN_ID]) {
        const res = await callRoute(first, route, id, token)
        assertProblem(res, 403, 'subject_deleted')
        assert.equal(res.headers.get('cache-control'), 'no-store')
      }
    }
    const created = await first.call('POST', '/users', {
      token,
      json: { email: uniqueEmail(), name: 'Ghost' },
    })
    assertProblem(created, 403, 'subject_deleted')
    assert.deepEqual(await first.snapshot(), before, 'a refused call changed the data')

    await first.service.close()
    const second = await startService(t, { dataDir: first.dataDir })
    assertProblem(await second.call('GET', '/users', { token }), 403, 'subject_deleted')
    assertProblem(
      await second.call('GET', `/users/${target.id}`, { token }),
      403,
      'subject_deleted',
    )
    assert.deepEqual(await second.snapshot(), before)
  })

  it('refuses the token of a user deleted without a suspension first', async (t) => {
    const s = await startService(t)
    const subject = await s.createUser()
    const token = makeToken({ sub: subject.id, scope: 'users:read' })
    assert.equal((await s.call('GET', '/users', { token })).status, 200)
    assert.equal((await s.call('DELETE', `/users/${subject.id}`)).status, 204)
    assertProblem(await s.call('GET', '/users', { token }), 403, 'subject_deleted')
  })

  it('leaves other subjects alone, user ids or not', async (t) => {
    const s = await startService(t)
    const gone = await s.createUser()
    const kept = await s.createUser()
    assert.equal((await s.call('DELETE', `/users/${gone.id}`)).status, 204)
    for (const sub of [kept.id, UNKNOWN_ID, 'service-account']) {
      const res = await s.call('GET', '/users', { token: makeToken({ sub, scope: 'users:read' }) })
      assert.equal(res.status, 200, `${sub}: ${res.text}`)
    }
  })
})

describe('issuer and audience', () => {
  it('accepts a token with the configured iss and aud (string or array)', async (t) => {
    const s = await startService(t, withIssuer)
    for (const aud of [AUDIENCE, ['other', AUDIENCE]]) {
      const res = await s.call('GET', '/users', {
        token: makeToken({ claims: { iss: ISSUER, aud } }),
      })
      assert.equal(res.status, 200, res.text)
    }
    const token = makeToken({ claims: { iss: ISSUER, aud: AUDIENCE } })
    const created = await s.call('POST', '/users', {
      token,
      json: { email: uniqueEmail(), name: 'Issued' },
    })
    assert.equal(created.status, 201, created.text)
  })

  it('accepts any iss and aud when none is configured', async (t) => {
    const s = await startService(t)
    const res = await s.call('GET', '/users', {
      token: makeToken({ claims: { iss: 'anyone', aud: 'anything' } }),
    })
    assert.equal(res.status, 200, res.text)
  })

  it('checks only what is configured', async (t) => {
    const issuerOnly = await startService(t, { issuer: ISSUER })
    assert.equal(
      (await issuerOnly.call('GET', '/users', { token: makeToken({ claims: { iss: ISSUER } }) }))
        .status,
      200,
    )
    const token = makeToken({ claims: { iss: 'x' } })
    assertUnauthorized(await issuerOnly.call('GET', '/users', { token }), 'token_invalid', token)
    const audienceOnly = await startService(t, { audience: AUDIENCE })
    assert.equal(
      (
        await audienceOnly.call('GET', '/users', {
          token: makeToken({ claims: { aud: AUDIENCE } }),
        })
      ).status,
      200,
    )
    const noAudience = makeToken()
    assertUnauthorized(
      await audienceOnly.call('GET', '/users', { token: noAudience }),
      'token_invalid',
      noAudience,
    )
  })
})

describe('key rotation', () => {
  it('accepts tokens of each key, by kid or without one', async (t) => {
    const s = await startService(t, withKids)
    for (const token of [
      makeToken({ header: { kid: 'k1' } }),
      makeToken({ secret: OTHER_SECRET, header: { kid: 'k2' } }),
      makeToken({ secret: OTHER_SECRET }),
      makeToken(),
    ]) {
      const res = await s.call('GET', '/users', { token })
      assert.equal(res.status, 200, res.text)
    }
  })

  it('ignores the kid with a single secret', async (t) => {
    const s = await startService(t)
    const res = await s.call('GET', '/users', { token: makeToken({ header: { kid: 'whatever' } }) })
    assert.equal(res.status, 200, res.text)
  })
})

describe('clock, leeway and the verification cache', () => {
  it('accepts the same token twice, and refuses it once exp + leeway has passed', async (t) => {
    const clock = { nowMs: Date.now() }
    const s = await startService(t, { now: () => clock.nowMs })
    const nowS = Math.floor(clock.nowMs / 1000)
    const token = makeToken({ nowS, ttl: 60, scope: 'users:read' })
    assert.equal((await s.call('GET', '/users', { token })).status, 200)
    assert.equal((await s.call('GET', '/users', { token })).status, 200)
    clock.nowMs = (nowS + 60 + 29) * 1000
    assert.equal((await s.call('GET', '/users', { token })).status, 200)
    clock.nowMs = (nowS + 60 + 31) * 1000
    assertUnauthorized(await s.call('GET', '/users', { token }), 'token_expired', token)
    assertUnauthorized(await s.call('GET', '/users', { token }), 'token_expired', token)
    const fresh = makeToken({ nowS: nowS + 91, ttl: 60, scope: 'users:read' })
    assert.equal((await s.call('GET', '/users', { token: fresh })).status, 200)
  })

  it('uses the configured leeway', async (t) => {
    const strict = await startService(t, { leewaySeconds: 0 })
    const late = makeToken({ nowS: nowSeconds() - 310, ttl: 300 })
    assertUnauthorized(await strict.call('GET', '/users', { token: late }), 'token_expired', late)
    const early = makeToken({ claims: { nbf: nowSeconds() + 10 } })
    assertUnauthorized(await strict.call('GET', '/users', { token: early }), 'token_invalid', early)
    const lenient = await startService(t)
    assert.equal((await lenient.call('GET', '/users', { token: late })).status, 200)
    assert.equal((await lenient.call('GET', '/users', { token: early })).status, 200)
  })

  it('refuses a token until its nbf comes, then accepts it', async (t) => {
    const clock = { nowMs: Date.now() }
    const s = await startService(t, { now: () => clock.nowMs, leewaySeconds: 0 })
    const nowS = Math.floor(clock.nowMs / 1000)
    const token = makeToken({ nowS, ttl: 600, claims: { nbf: nowS + 100 } })
    assertUnauthorized(await s.call('GET', '/users', { token }), 'token_invalid', token)
    clock.nowMs = (nowS + 100) * 1000
    assert.equal((await s.call('GET', '/users', { token })).status, 200)
  })
})

describe('the RFC 7515 Appendix A.1 token', () => {
  const secret = `base64url:${RFC7515_K}`

  it('is 401 token_expired with the real clock, with error="invalid_token"', async (t) => {
    const s = await startService(t, { secret })
    assertUnauthorized(
      await s.call('GET', '/users', { token: RFC7515_TOKEN }),
      'token_expired',
      RFC7515_TOKEN,
    )
    // The same key signs tokens the service accepts: the base64url: secret is the decoded key.
    const res = await s.call('GET', '/users', {
      token: makeToken({ secret: Buffer.from(RFC7515_K, 'base64url') }),
    })
    assert.equal(res.status, 200, res.text)
    const text = makeToken({ secret: RFC7515_K })
    assertUnauthorized(await s.call('GET', '/users', { token: text }), 'token_invalid', text)
  })

  it('is 401 token_invalid (missing sub) with a clock before its exp, and after any one character changes', async (t) => {
    const s = await startService(t, { secret, now: () => (RFC7515_EXP - 380) * 1000 })
    assertUnauthorized(
      await s.call('GET', '/users', { token: RFC7515_TOKEN }),
      'token_invalid',
      RFC7515_TOKEN,
    )
    // With a sub, the same key and clock pass: only the missing sub refused the example.
    const withSub = signJwt(
      { sub: 'joe', exp: RFC7515_EXP, scope: 'users:read' },
      {},
      Buffer.from(RFC7515_K, 'base64url'),
    )
    assert.equal((await s.call('GET', '/users', { token: withSub })).status, 200)
    for (const part of [0, 1, 2] as const) {
      for (const index of partIndexes(RFC7515_TOKEN, part)) {
        const flipped = flipChar(RFC7515_TOKEN, index)
        assertUnauthorized(
          await s.call('GET', '/users', { token: flipped }),
          'token_invalid',
          flipped,
        )
      }
    }
  })
})
