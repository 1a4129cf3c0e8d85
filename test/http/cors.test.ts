import assert from 'node:assert/strict'
import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import {
  CORS_ALLOW_HEADERS,
  CORS_EXPOSE_HEADERS,
  createCors,
  parseCorsOrigins,
} from '../../src/http/cors.js'
import { parseConfig } from '../../src/process/config.js'
import { assertProblem, request, type TestResponse } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { startService, uniqueEmail } from '../helpers/service.js'

const APP = 'http://app.example.test:5173'
const OTHER = 'https://evil.example.test'

function preflight(
  url: string,
  origin: string,
  method = 'POST',
  headers = 'authorization, content-type',
): Promise<TestResponse> {
  return request('OPTIONS', url, {
    headers: {
      origin,
      'access-control-request-method': method,
      'access-control-request-headers': headers,
    },
  })
}

interface OpenApiParameter {
  readonly $ref?: string
  readonly name?: string
  readonly in?: string
}

interface OpenApiDocument {
  readonly paths: Record<string, Record<string, unknown>>
  readonly components: { readonly parameters: Record<string, OpenApiParameter> }
}

function varyList(res: TestResponse): string[] {
  return (res.headers.get('vary') ?? '')
    .split(',')
    .map((item) => item.trim().toLowerCase())
    .filter((item) => item !== '')
}

/** An answer a page on `origin` may read: the origin allowed, the useful headers exposed, Vary: Origin. */
function assertCorsFor(res: TestResponse, origin: string): void {
  assert.equal(
    res.headers.get('access-control-allow-origin'),
    origin,
    `ACAO on ${res.status}: ${res.text}`,
  )
  assert.equal(res.headers.get('access-control-expose-headers'), CORS_EXPOSE_HEADERS)
  assert.ok(varyList(res).includes('origin'), `Vary: ${res.headers.get('vary') ?? ''}`)
  assert.equal(res.headers.get('access-control-allow-credentials'), null)
}

function assertNoCors(res: TestResponse): void {
  for (const name of [
    'access-control-allow-origin',
    'access-control-expose-headers',
    'access-control-allow-methods',
    'access-control-allow-headers',
    'access-control-max-age',
    'access-control-allow-credentials',
  ]) {
    assert.equal(res.headers.get(name), null, `${name} on ${res.status}`)
  }
}

describe('CORS off (no CORS_ORIGINS)', () => {
  it('sends no CORS header at all, and OPTIONS preflights are 405 with Allow', async (t) => {
    const s = await startService(t)
    const list = await s.call('GET', '/users', { headers: { origin: APP } })
    assert.equal(list.status, 200)
    assertNoCors(list)
    assert.deepEqual(varyList(list), ['authorization'])
    const pre = await preflight(`${s.baseUrl}/users`, APP)
    assertProblem(pre, 405, 'method_not_allowed')
    assert.equal(pre.headers.get('allow'), 'GET, POST, HEAD')
    assertNoCors(pre)
  })
})

describe('CORS with a list of origins', () => {
  it("answers a preflight from an allowed origin with 204, the path's methods, the headers and a max age", async (t) => {
    const s = await startService(t, { corsOrigins: [APP, 'https://admin.example.test'] })
    const pre = await preflight(`${s.baseUrl}/users`, APP)
    assert.equal(pre.status, 204, pre.text)
    assert.equal(pre.text, '')
    assertCorsFor(pre, APP)
    assert.equal(pre.headers.get('access-control-allow-methods'), 'GET, POST, HEAD')
    assert.equal(pre.headers.get('access-control-allow-headers'), CORS_ALLOW_HEADERS)
    for (const header of ['Authorization', 'Content-Type', 'If-Match', 'If-None-Match']) {
      assert.ok(CORS_ALLOW_HEADERS.split(', ').includes(header), header)
    }
    assert.match(pre.headers.get('access-control-max-age') ?? '', /^[1-9]\d*$/)

    const item = await preflight(
      `${s.baseUrl}/users/0190a0a0-0000-7000-8000-000000000000`,
      'https://admin.example.test',
      'PATCH',
    )
    assert.equal(item.status, 204)
    assertCorsFor(item, 'https://admin.example.test')
    assert.equal(item.headers.get('access-control-allow-methods'), 'GET, PUT, PATCH, DELETE, HEAD')

    const verb = await preflight(
      `${s.baseUrl}/users/0190a0a0-0000-7000-8000-000000000000:suspend`,
      APP,
    )
    assert.equal(verb.status, 204)
    assert.equal(verb.headers.get('access-control-allow-methods'), 'POST')
  })

  it('allows in the preflight of each path every request header its operations declare, Last-Event-ID included', async (t) => {
    const s = await startService(t, { corsOrigins: [APP] })
    const doc = (await request('GET', `${s.baseUrl}/openapi.json`)).body as OpenApiDocument
    const named = (parameter: OpenApiParameter): OpenApiParameter => {
      const ref = parameter.$ref?.split('/').pop()
      return ref === undefined ? parameter : (doc.components.parameters[ref] ?? parameter)
    }
    let checked = 0
    for (const [pathName, item] of Object.entries(doc.paths)) {
      // An operation's parameters; the path item's description and servers have none.
      for (const [method, operation] of Object.entries(item)) {
        const parameters: unknown =
          typeof operation === 'object' && operation !== null && 'parameters' in operation
            ? operation.parameters
            : undefined
        if (!Array.isArray(parameters)) continue
        const headers = parameters
          .map((parameter: OpenApiParameter) => named(parameter))
          .filter((parameter) => parameter.in === 'header')
          .map((parameter) => String(parameter.name).toLowerCase())
        // No base path: the root routes sit beside the others.
        const path = pathName.replace('{id}', '0190a0a0-0000-7000-8000-000000000000')
        const pre = await preflight(
          `${s.url}${path}`,
          APP,
          method.toUpperCase(),
          headers.join(', '),
        )
        assert.equal(pre.status, 204, `${method} ${pathName}`)
        const allowed = (pre.headers.get('access-control-allow-headers') ?? '')
          .split(',')
          .map((name) => name.trim().toLowerCase())
        for (const header of headers) {
          assert.ok(allowed.includes(header), `${method.toUpperCase()} ${pathName}: ${header}`)
          checked += 1
        }
      }
    }
    assert.ok(checked > 50, String(checked))
  })

  // A page whose fetches carry W3C Trace Context (OpenTelemetry's browser instrumentation sends
  // traceparent): without it in the list, the browser refused every request of that page.
  it('allows traceparent, which the service reads for the log line, in every preflight', async (t) => {
    const s = await startService(t, { corsOrigins: [APP] })
    const pre = await preflight(`${s.baseUrl}/users`, APP, 'GET', 'authorization, traceparent')
    assert.equal(pre.status, 204, pre.text)
    const allowed = (pre.headers.get('access-control-allow-headers') ?? '')
      .split(',')
      .map((name) => name.trim().toLowerCase())
    assert.ok(allowed.includes('traceparent'), allowed.join(', '))
  })

  it('answers a preflight of an unknown path with 404 not_found, readable by the page', async (t) => {
    const s = await startService(t, { corsOrigins: [APP] })
    const res = await preflight(`${s.baseUrl}/nothing/here`, APP)
    assertProblem(res, 404, 'not_found')
    assertCorsFor(res, APP)
    assert.equal(res.headers.get('access-control-allow-methods'), null)
  })

  it('gives a disallowed origin no CORS headers: its preflight is 405 with Allow, its reads carry Vary: Origin only', async (t) => {
    const s = await startService(t, { corsOrigins: [APP] })
    const pre = await preflight(`${s.baseUrl}/users`, OTHER)
    assertProblem(pre, 405, 'method_not_allowed')
    assert.equal(pre.headers.get('allow'), 'GET, POST, HEAD')
    assertNoCors(pre)
    // Same host, other port or scheme: a different origin.
    for (const origin of [
      'http://app.example.test:5174',
      'https://app.example.test:5173',
      'null',
    ]) {
      const res = await s.call('GET', '/users', { headers: { origin } })
      assert.equal(res.status, 200)
      assertNoCors(res)
      assert.deepEqual(varyList(res), ['authorization', 'origin'])
    }
  })

  it('keeps other OPTIONS requests 405 with Allow (no Access-Control-Request-Method)', async (t) => {
    const s = await startService(t, { corsOrigins: [APP] })
    const plain = await request('OPTIONS', `${s.baseUrl}/users`)
    assertProblem(plain, 405, 'method_not_allowed')
    assert.equal(plain.headers.get('allow'), 'GET, POST, HEAD')
    assertNoCors(plain)
    const fromApp = await request('OPTIONS', `${s.baseUrl}/users`, { headers: { origin: APP } })
    assertProblem(fromApp, 405, 'method_not_allowed')
    assert.equal(fromApp.headers.get('allow'), 'GET, POST, HEAD')
    assertCorsFor(fromApp, APP)
    assert.equal(fromApp.headers.get('access-control-allow-methods'), null)
  })

  it('lets an allowed origin read lists, creates and items, with ETag, Location and X-Request-Id exposed', async (t) => {
    const s = await startService(t, { corsOrigins: [APP] })
    const created = await s.call('POST', '/users', {
      json: { email: uniqueEmail(), name: 'Cors' },
      headers: { origin: APP, 'x-request-id': 'cors-create-1' },
    })
    assert.equal(created.status, 201, created.text)
    assertCorsFor(created, APP)
    assert.equal(created.headers.get('x-request-id'), 'cors-create-1')
    assert.ok(created.headers.get('location'))
    const id = created.json<{ id: string }>().id

    const list = await s.call('GET', '/users', { headers: { origin: APP } })
    assert.equal(list.status, 200)
    assertCorsFor(list, APP)
    assert.deepEqual(varyList(list), ['authorization', 'origin'])

    const item = await s.call('GET', `/users/${id}`, { headers: { origin: APP } })
    assert.equal(item.status, 200)
    assertCorsFor(item, APP)
    const etag = item.headers.get('etag') ?? ''
    const notModified = await s.call('GET', `/users/${id}`, {
      headers: { origin: APP, 'if-none-match': etag },
    })
    assert.equal(notModified.status, 304)
    assertCorsFor(notModified, APP)

    const noOrigin = await s.call('GET', `/users/${id}`)
    assert.equal(noOrigin.status, 200)
    assertNoCors(noOrigin)
    assert.deepEqual(varyList(noOrigin), ['authorization', 'origin'])

    // Only an OPTIONS request is a preflight: a read that carries a preflight's headers is a read.
    const lookalike = await s.call('GET', `/users/${id}`, {
      headers: { origin: APP, 'access-control-request-method': 'GET' },
    })
    assert.equal(lookalike.status, 200)
    assert.equal(lookalike.json<{ id: string }>().id, id)
    assert.equal(lookalike.headers.get('access-control-allow-methods'), null)
    assertCorsFor(lookalike, APP)
  })

  it('puts the CORS headers on error answers too (401, 404, 412), so the page can read them', async (t) => {
    const s = await startService(t, { corsOrigins: [APP] })
    const unauthorized = await s.call('GET', '/users', {
      token: undefined,
      headers: { origin: APP },
    })
    assertProblem(unauthorized, 401, 'token_missing')
    assertCorsFor(unauthorized, APP)
    const missing = await s.call('GET', '/users/0190a0a0-0000-7000-8000-000000000000', {
      headers: { origin: APP },
    })
    assertProblem(missing, 404, 'not_found')
    assertCorsFor(missing, APP)
    const user = await s.createUser()
    const stale = await s.call('PATCH', `/users/${user.id}`, {
      json: { name: 'Changed' },
      headers: { origin: APP, 'if-match': '"stale"' },
    })
    assertProblem(stale, 412, 'precondition_failed')
    assertCorsFor(stale, APP)
    assert.equal((await s.getUser(user.id)).name, user.name)
  })

  it('puts the CORS headers on a 503 maintenance answer, with Retry-After exposed', async (t) => {
    const s = await startService(t, { corsOrigins: [APP] })
    await writeFile(path.join(s.dataDir, 'maintenance'), '')
    const res = await waitFor(
      'maintenance',
      async () => {
        const answer = await s.call('GET', '/users', { headers: { origin: APP } })
        return answer.status === 503 ? answer : undefined
      },
      10_000,
    )
    assertProblem(res, 503, 'maintenance')
    assertCorsFor(res, APP)
    assert.match(res.headers.get('retry-after') ?? '', /^\d+$/)
    assert.ok(CORS_EXPOSE_HEADERS.includes('Retry-After'))
    // A preflight is still answered: the page then reads the 503 itself.
    const pre = await preflight(`${s.baseUrl}/users`, APP, 'GET')
    assert.equal(pre.status, 204)
  })

  it('answers preflights under BASE_PATH and at the root routes', async (t) => {
    const s = await startService(t, { corsOrigins: [APP], basePath: '/v1' })
    const pre = await preflight(`${s.url}/v1/users`, APP)
    assert.equal(pre.status, 204)
    assertProblem(await preflight(`${s.url}/users`, APP), 404, 'not_found')
    const health = await preflight(`${s.url}/healthz`, APP, 'GET')
    assert.equal(health.status, 204)
    assert.equal(health.headers.get('access-control-allow-methods'), 'GET, HEAD')
    const read = await request('GET', `${s.url}/healthz`, { headers: { origin: APP } })
    assert.equal(read.status, 200)
    assertCorsFor(read, APP)
  })
})

describe('CORS with *', () => {
  it('allows any origin with a literal * and never allows credentials', async (t) => {
    const s = await startService(t, { corsOrigins: '*' })
    const pre = await preflight(`${s.baseUrl}/users`, OTHER)
    assert.equal(pre.status, 204)
    assertCorsFor(pre, '*')
    const list = await s.call('GET', '/users', { headers: { origin: OTHER } })
    assert.equal(list.status, 200)
    assertCorsFor(list, '*')
    const noOrigin = await s.call('GET', '/users')
    assertNoCors(noOrigin)
  })
})

describe('CORS_ORIGINS', () => {
  it('is off when unset or empty, * for any, or a list of origins', () => {
    assert.equal(parseConfig({}).corsOrigins, undefined)
    assert.equal(parseConfig({ CORS_ORIGINS: ' ' }).corsOrigins, undefined)
    assert.equal(parseConfig({ CORS_ORIGINS: '*' }).corsOrigins, '*')
    assert.equal(parseConfig({ CORS_ORIGINS: ' * ' }).corsOrigins, '*')
    assert.equal(parseCorsOrigins(' * '), '*')
    assert.deepEqual(
      parseConfig({ CORS_ORIGINS: 'https://a.example, http://localhost:3000,' }).corsOrigins,
      ['https://a.example', 'http://localhost:3000'],
    )
    assert.equal(createCors(parseCorsOrigins(',')), undefined)
    assert.equal(createCors(undefined), undefined)
  })

  it('refuses anything that is not an origin, naming the variable', () => {
    for (const bad of [
      'app.example.com',
      'https://app.example.com/',
      'https://app.example.com/x',
      'ftp://a.example',
      'https://App.Example.com',
      'null',
      'https://a.example,*',
    ]) {
      assert.throws(
        () => parseConfig({ CORS_ORIGINS: bad }),
        (error: Error) => {
          assert.equal(error.name, 'ConfigError')
          assert.match(error.message, /^CORS_ORIGINS: /)
          return true
        },
        bad,
      )
    }
  })

  it('refuses a bad origin given to the service as an option, at construction', () => {
    assert.throws(() => createCors(['https://a.example/path']), /not an origin/)
    assert.throws(
      () => createCors(['app.example.com']),
      (error: Error) => {
        assert.equal(error.name, 'CorsConfigError')
        assert.equal(
          error.message,
          '"app.example.com" is not an origin (like https://app.example.com)',
        )
        return true
      },
    )
  })
})
