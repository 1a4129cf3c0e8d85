import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { describe, it } from 'node:test'

import { parseConfig } from '../../src/process/config.js'
import {
  buildPage,
  ADMIN_CSP as CSP,
  loadEverything,
  pageFileSizes,
} from '../helpers/admin-page.js'
import { assertProblem, type Problem } from '../helpers/http.js'
import { startService, type TestService } from '../helpers/service.js'

// Built before any service starts (tsc blocks the event loop for seconds).
buildPage()

const MAX_WEIGHT = 128 * 1024

function assertPageHeaders(res: Response, type: RegExp, what: string): void {
  assert.equal(res.status, 200, what)
  assert.match(res.headers.get('content-type') ?? '', type, what)
  assert.equal(res.headers.get('content-security-policy'), CSP, what)
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff', what)
  assert.equal(res.headers.get('referrer-policy'), 'no-referrer', what)
  assert.equal(res.headers.get('cache-control'), 'no-cache', what)
}

async function assertNotFound(s: TestService, path: string): Promise<void> {
  const res = await s.call('GET', path, { token: undefined })
  assert.equal(res.status, 404, path)
  assert.equal(res.json<Problem>().code, 'not_found', path)
  assert.equal(res.headers.get('content-security-policy'), null, path)
}

describe('GET /admin: the admin page', () => {
  it('is 200 text/html with no token, with the CSP, nosniff, no-referrer and no-cache; HEAD too; other methods 405', async (t) => {
    const s = await startService(t)
    const page = await fetch(`${s.url}/admin`)
    assertPageHeaders(page, /^text\/html; charset=utf-8$/, 'GET /admin')
    assert.match(await page.text(), /^<!doctype html>/i)

    const head = await fetch(`${s.url}/admin`, { method: 'HEAD' })
    assertPageHeaders(head, /^text\/html; charset=utf-8$/, 'HEAD /admin')
    assert.equal(await head.text(), '')
    assert.equal(head.headers.get('content-length'), page.headers.get('content-length'))

    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      for (const path of ['/admin', '/admin/main.js']) {
        const res = await s.call(method, path, { token: undefined })
        assert.equal(res.status, 405, `${method} ${path}`)
        assert.equal(res.headers.get('allow'), 'GET, HEAD')
        assert.equal(res.json<Problem>().code, 'method_not_allowed')
      }
    }
  })

  it('serves every file the page loads from under /admin/, with the same headers, and nothing else', async (t) => {
    const s = await startService(t)
    const loaded = await loadEverything(`${s.url}/admin`)
    const files = [...loaded.keys()].filter((url) => url !== `${s.url}/admin`)
    assert.ok(files.some((url) => url.endsWith('/admin/main.js')))
    assert.ok(files.some((url) => url.endsWith('/admin/admin.css')))
    for (const [url, res] of loaded) {
      assert.ok(url.startsWith(`${s.url}/admin`), `${url} is the service's, under /admin`)
      assertPageHeaders(res, /^(text\/html|text\/javascript|text\/css|image\/svg\+xml)/, url)
    }
    // Every file built is one the page loads: nothing shipped is dead weight.
    const names = new Set(files.map((url) => url.slice(url.lastIndexOf('/') + 1)))
    assert.deepEqual(
      [...pageFileSizes().keys()].filter((name) => name !== 'index.html' && !names.has(name)),
      [],
    )
    await assertNotFound(s, '/admin/nothing.js')
    await assertNotFound(s, '/admin/index.html')
    await assertNotFound(s, '/admin/')
    await assertNotFound(s, '/admin/..%2Fpackage.json')
  })

  it('tags every file with a strong ETag of its bytes: If-None-Match revalidates to 304, a stale If-Match is 412', async (t) => {
    const s = await startService(t, { rateLimitAddress: { quota: 1000, windowSeconds: 3600 } })
    for (const path of ['/admin', '/admin/main.js', '/admin/admin.css']) {
      const first = await fetch(`${s.url}${path}`)
      const body = Buffer.from(await first.arrayBuffer())
      const etag = first.headers.get('etag') ?? ''
      assert.equal(etag, `"${createHash('sha256').update(body).digest('base64url')}"`, path)
      const head = await fetch(`${s.url}${path}`, { method: 'HEAD' })
      assert.equal(head.headers.get('etag'), etag, `HEAD ${path}`)

      // A browser's revalidation of what it holds (no-cache): 304, no body, the same headers.
      for (const [method, ifNoneMatch] of [
        ['GET', etag],
        ['GET', `"other", W/${etag}`],
        ['GET', '*'],
        ['HEAD', etag],
      ] as const) {
        const label = `${method} ${path} If-None-Match: ${ifNoneMatch}`
        const res = await fetch(`${s.url}${path}`, {
          method,
          headers: { 'if-none-match': ifNoneMatch },
        })
        assert.equal(res.status, 304, label)
        assert.equal(await res.text(), '', label)
        assert.equal(res.headers.get('etag'), etag, label)
        assert.equal(res.headers.get('cache-control'), 'no-cache', label)
        assert.equal(res.headers.get('content-security-policy'), CSP, label)
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff', label)
        assert.match(res.headers.get('x-request-id') ?? '', /./, label)
        assert.match(res.headers.get('ratelimit') ?? '', /^"address";r=\d+;t=\d+$/, label)
      }

      // Another tag, or the tag of another file: the file is sent again.
      const changed = await fetch(`${s.url}${path}`, { headers: { 'if-none-match': '"stale"' } })
      assertPageHeaders(changed, /./, path)
      assert.deepEqual(Buffer.from(await changed.arrayBuffer()), body)

      // If-Match: the current tag or * holds; any other is 412, before If-None-Match.
      for (const ifMatch of [etag, '*', `"stale", ${etag}`]) {
        const res = await fetch(`${s.url}${path}`, { headers: { 'if-match': ifMatch } })
        assert.equal(res.status, 200, `If-Match: ${ifMatch}`)
      }
      const refused = await s.call('GET', `${s.url}${path}`, {
        token: undefined,
        headers: { 'if-match': '"stale"', 'if-none-match': etag },
      })
      assert.match(assertProblem(refused, 412, 'precondition_failed').detail, /current ETag/)
      assert.equal(refused.headers.get('content-security-policy'), null)
      const empty = await s.call('GET', `${s.url}${path}`, {
        token: undefined,
        headers: { 'if-none-match': '' },
      })
      assertProblem(empty, 400, 'bad_request')
    }
    // Every file has its own tag, and an unknown file is 404 whatever the preconditions.
    const tags = [...(await loadEverything(`${s.url}/admin`)).values()].map((res) =>
      res.headers.get('etag'),
    )
    assert.equal(new Set(tags).size, tags.length)
    const unknown = await s.call('GET', `${s.url}/admin/nothing.js`, {
      token: undefined,
      headers: { 'if-match': '"stale"' },
    })
    assertProblem(unknown, 404, 'not_found')
  })

  it('weighs at most 128 KiB, everything it loads together', async (t) => {
    const s = await startService(t)
    const loaded = await loadEverything(`${s.url}/admin`)
    const total = [...loaded.values()].reduce((sum, res) => sum + res.bytes, 0)
    assert.ok(total > 10_000, `${total} bytes: the page and its scripts were all followed`)
    assert.ok(total <= MAX_WEIGHT, `the page weighs ${total} bytes, more than ${MAX_WEIGHT}`)
  })

  it('has no inline script or style, no style or on… attribute, and no eval', async (t) => {
    const s = await startService(t)
    const loaded = await loadEverything(`${s.url}/admin`)
    for (const [url] of loaded) {
      const text = await (await fetch(url)).text()
      if (url.endsWith('/admin')) {
        assert.doesNotMatch(text, /<style/i)
        assert.doesNotMatch(text, /\sstyle\s*=/i)
        assert.doesNotMatch(text, /\son[a-z]+\s*=/i)
        for (const tag of text.match(/<script[^>]*>/gi) ?? []) assert.match(tag, /\ssrc="/)
        assert.doesNotMatch(text, /<script[^>]*>[^<\s]/i)
      }
      if (url.endsWith('.js')) {
        assert.doesNotMatch(text, /\beval\s*\(|new Function\s*\(|\.innerHTML\b|\.style\b/, url)
      }
    }
  })

  // The rate limits count every routed request but the probes, /metrics and preflights: the
  // page's files count against the client's address like any anonymous request.
  it('is counted by the rate limits, against the address: each file takes one unit', async (t) => {
    const s = await startService(t, { rateLimitAddress: { quota: 20, windowSeconds: 3600 } })
    const first = [...(await loadEverything(`${s.url}/admin`)).values()]
    assert.ok(first.length >= 10, `${first.length} files`)
    const left = first.map((res) => Number(res.headers.get('x-ratelimit-remaining')))
    assert.deepEqual(
      left,
      first.map((_, at) => 19 - at),
    )
    for (const res of first) {
      assert.equal(res.status, 200)
      assert.match(res.headers.get('ratelimit-policy') ?? '', /^"address";q=20;w=3600/)
    }
    const second = [...(await loadEverything(`${s.url}/admin`)).values()]
    const refused = second.filter((res) => res.status === 429)
    assert.ok(refused.length > 0, 'the quota runs out within a second load')
    for (const res of refused) assert.ok(Number(res.headers.get('retry-after')) > 0)
    assert.equal((await s.call('GET', '/users', { token: undefined })).status, 429)
  })

  // A file the page does not have is a path that does not exist: a route 404, which comes before
  // the limiter (never counted, never refused, no fields), and 404 for every method, not 405.
  it('answers a file the page does not have as any unknown path: not counted, never 429', async (t) => {
    const s = await startService(t, { rateLimitAddress: { quota: 2, windowSeconds: 3600 } })
    // Written with percent-encoding too: decoded, the name is still no file of the page.
    const encoded = ['/admin/nothing%2Ejs', '/admin/%6Eothing.js', '/admin/index%2Ehtml']
    for (const path of [
      '/admin/nothing.js',
      '/admin/index.html',
      '/admin/main.js.map',
      ...encoded,
    ]) {
      for (let i = 0; i < 3; i += 1) {
        const res = await s.call('GET', path, { token: undefined })
        assertProblem(res, 404, 'not_found')
        assert.equal(res.headers.get('ratelimit'), null, path)
      }
      assertProblem(await s.call('POST', path, { token: undefined }), 404, 'not_found')
    }
    const page = await fetch(`${s.url}/admin/main.js`)
    assert.equal(page.status, 200)
    assert.match(page.headers.get('ratelimit') ?? '', /^"address";r=1;/)
    // A file the page has, its name encoded, is that file (and counted as any request).
    assert.equal((await fetch(`${s.url}/admin/main%2Ejs`)).status, 200)
  })

  it("counts a file fetched with a valid bearer token against the token's subject, as any request", async (t) => {
    const s = await startService(t, {
      rateLimitAddress: { quota: 20, windowSeconds: 3600 },
      rateLimitSubject: { quota: 100, windowSeconds: 3600 },
    })
    const withToken = await fetch(`${s.url}/admin`, {
      headers: { authorization: `Bearer ${s.token}` },
    })
    assert.equal(withToken.status, 200)
    assert.equal(withToken.headers.get('ratelimit-policy'), '"subject";q=100;w=3600')
    assert.match(withToken.headers.get('ratelimit') ?? '', /^"subject";r=99;t=\d+$/)
    const anonymous = await fetch(`${s.url}/admin`)
    assert.equal(anonymous.status, 200)
    assert.match(anonymous.headers.get('ratelimit') ?? '', /^"address";r=19;t=\d+$/)
  })

  it('lives under BASE_PATH, and its relative URLs reach the API there', async (t) => {
    const s = await startService(t, { basePath: '/v1' })
    assertPageHeaders(await fetch(`${s.url}/v1/admin`), /^text\/html/, 'GET /v1/admin')
    assertPageHeaders(await fetch(`${s.url}/v1/admin/main.js`), /^text\/javascript/, 'main.js')
    await assertNotFound(s, `${s.url}/admin`)
    // The page calls `users` and `events` relative to itself: /v1/users, /v1/events.
    assert.equal(new URL('users', `${s.url}/v1/admin`).href, `${s.baseUrl}/users`)
    assert.equal((await s.call('GET', new URL('users', `${s.url}/v1/admin`).href)).status, 200)
  })

  it('ADMIN_PAGE=off: the page and every file under /admin/ answer 404', async (t) => {
    assert.equal(parseConfig({ ADMIN_PAGE: 'off', JWT_SECRET: 'x'.repeat(32) }).adminPage, false)
    assert.equal(parseConfig({ JWT_SECRET: 'x'.repeat(32) }).adminPage, true)
    const on = await startService(t)
    const paths = [...(await loadEverything(`${on.url}/admin`)).keys()].map(
      (url) => new URL(url).pathname,
    )
    assert.ok(paths.length > 5)
    const off = await startService(t, { adminPage: false })
    for (const path of paths) {
      await assertNotFound(off, `${off.url}${path}`)
      const head = await fetch(`${off.url}${path}`, { method: 'HEAD' })
      assert.equal(head.status, 404)
    }
    // The API is there as before.
    assert.equal((await off.call('GET', '/users')).status, 200)
  })
})
