import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { type BrowserContext, chromium, type Page } from 'playwright-core'

import { startService } from '../helpers/service.js'

const CHROMIUM = '/usr/bin/chromium'
// What these machines need to run Chromium headless as root in a container, quietly.
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]
const SKIP = existsSync(CHROMIUM)
  ? false
  : `no ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) to run the browser test`

/**
 * The front end: plain browser JavaScript in the page itself, as a real app would ship it. The test
 * calls its functions by name with a string expression, so nothing of the test's own compiled
 * code (tsx's helpers) has to run in the page.
 */
const FRONT_END = `
const fields = ['etag', 'location', 'link', 'x-request-id', 'content-type', 'retry-after']
function read(res, body) {
  return { status: res.status, headers: Object.fromEntries(fields.map((name) => [name, res.headers.get(name)])), body }
}
async function useService(api, token) {
  const auth = { authorization: 'Bearer ' + token }
  const created = await fetch(api + '/users', {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', 'x-request-id': 'from-the-browser-1' },
    body: JSON.stringify({ email: 'browser.' + Date.now() + '@example.com', name: 'From the browser' }),
  })
  const createdBody = await created.json()
  const list = await fetch(api + '/users?limit=1', { headers: auth })
  const listBody = await list.json()
  const etag = created.headers.get('etag')
  const patch = (name) => fetch(api + '/users/' + createdBody.id, {
    method: 'PATCH',
    headers: { ...auth, 'content-type': 'application/merge-patch+json', 'if-match': etag },
    body: JSON.stringify({ name }),
  })
  const patched = await patch('Renamed in the browser')
  const patchedBody = await patched.json()
  const stale = await patch('Lost update')
  const staleBody = await stale.json()
  const anonymous = await fetch(api + '/users')
  const anonymousBody = await anonymous.json()
  return {
    created: read(created, createdBody), list: read(list, listBody), patched: read(patched, patchedBody),
    stale: read(stale, staleBody), anonymous: read(anonymous, anonymousBody),
  }
}
async function attempt(target, init) {
  try {
    const res = await fetch(target, init)
    return 'answered ' + res.status
  } catch (error) {
    return error instanceof TypeError ? 'TypeError' : 'other: ' + String(error)
  }
}
async function tryService(api, root, token) {
  return {
    list: await attempt(api + '/users', { headers: { authorization: 'Bearer ' + token } }),
    create: await attempt(api + '/users', {
      method: 'POST',
      headers: { authorization: 'Bearer ' + token, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'blocked@example.com', name: 'Blocked' }),
    }),
    health: await attempt(root + '/healthz', {}),
  }
}
`
const PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>front end</title>
<script>${FRONT_END}</script></head><body>app</body></html>`

/** Calls a function of the page with JSON arguments. */
function callPage<T>(page: Page, name: string, ...args: readonly string[]): Promise<T> {
  return page.evaluate(
    `${name}(${args.map((arg) => JSON.stringify(arg)).join(', ')})`,
  ) as Promise<T>
}

/** A tiny static server: one page, on its own origin (127.0.0.1 and a port of its own). */
async function startPageServer(t: TestContext): Promise<string> {
  const server: Server = createServer((req, res) => {
    if (req.url === '/favicon.ico') {
      res.writeHead(404).end()
      return
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE)
  })
  await new Promise<void>((resolve) => {
    server.listen(0, '127.0.0.1', resolve)
  })
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve()
        })
        server.closeAllConnections()
      }),
  )
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

async function openBrowser(t: TestContext): Promise<BrowserContext> {
  // launchPersistentContext gives the browser a fresh --user-data-dir of its own (here: a new temp dir).
  const profile = await mkdtemp(path.join(tmpdir(), 'user-service-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    timeout: 60_000,
  })
  t.after(async () => {
    await context.close()
    await rm(profile, { recursive: true, force: true })
  })
  return context
}

async function openPage(context: BrowserContext, origin: string): Promise<Page> {
  const page = await context.newPage()
  const loaded = await page.goto(`${origin}/`)
  assert.equal(loaded?.status(), 200)
  return page
}

interface Exchange {
  status: number
  headers: Record<string, string | null>
  body: unknown
}

describe('CORS in headless Chromium', { skip: SKIP, timeout: 120_000 }, () => {
  it('lets a page on an allowed origin list, create, read ETag, Location, Link and X-Request-Id, and PATCH with If-Match', async (t) => {
    const pageOrigin = await startPageServer(t)
    const s = await startService(t, { corsOrigins: [pageOrigin] })
    await s.createUser({ name: 'Already here' })
    const context = await openBrowser(t)
    const page = await openPage(context, pageOrigin)
    assert.notEqual(new URL(pageOrigin).port, new URL(s.url).port)

    const result = await callPage<
      Record<'created' | 'list' | 'patched' | 'stale' | 'anonymous', Exchange>
    >(page, 'useService', s.baseUrl, s.token)

    assert.equal(result.created.status, 201, JSON.stringify(result.created))
    const created = result.created.body as { id: string; version: number }
    assert.equal(result.created.headers['location'], `/users/${created.id}`)
    assert.equal(result.created.headers['etag'], `"v${created.version}"`)
    assert.equal(result.created.headers['x-request-id'], 'from-the-browser-1')

    assert.equal(result.list.status, 200)
    assert.equal((result.list.body as { items: unknown[] }).items.length, 1)
    assert.match(result.list.headers['link'] ?? '', /^<[^>]*cursor=[^>]+>; rel="next"$/)
    assert.match(result.list.headers['x-request-id'] ?? '', /^[A-Za-z0-9._-]+$/)

    assert.equal(result.patched.status, 200, JSON.stringify(result.patched))
    assert.equal((result.patched.body as { name: string }).name, 'Renamed in the browser')
    assert.notEqual(result.patched.headers['etag'], result.created.headers['etag'])

    // Errors reach the page too: status, problem+json body and the request id.
    assert.equal(result.stale.status, 412)
    assert.equal((result.stale.body as { code: string }).code, 'precondition_failed')
    assert.equal(result.anonymous.status, 401)
    assert.equal((result.anonymous.body as { code: string }).code, 'token_missing')
    assert.equal(result.anonymous.headers['content-type'], 'application/problem+json')

    assert.equal((await s.getUser(created.id)).name, 'Renamed in the browser')
  })

  it('blocks a page on another origin: its fetch fails with a TypeError and nothing is created', async (t) => {
    const allowedOrigin = await startPageServer(t)
    const otherOrigin = await startPageServer(t)
    const s = await startService(t, { corsOrigins: [allowedOrigin] })
    const context = await openBrowser(t)
    const page = await openPage(context, otherOrigin)

    const outcome = await callPage<Record<string, string>>(
      page,
      'tryService',
      s.baseUrl,
      s.url,
      s.token,
    )

    assert.deepEqual(outcome, { list: 'TypeError', create: 'TypeError', health: 'TypeError' })
    // The create's preflight was refused, so the POST itself was never sent.
    assert.deepEqual(await s.snapshot(), [])
  })
})
