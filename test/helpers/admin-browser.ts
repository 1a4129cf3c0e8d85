import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { type AddressInfo, connect, createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'

import { type BrowserContext, chromium, type Page } from 'playwright-core'

import { buildPage } from './admin-page.js'

const CHROMIUM = '/usr/bin/chromium'
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** Why the admin page's browser tests skip, in one line, or false when Chromium is there. */
export const SKIP = existsSync(CHROMIUM)
  ? false
  : `no ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) to run the admin page's browser tests`

// Built before any service starts: tsc blocks this process's event loop for seconds, which a
// running service would take for overload.
if (SKIP === false) buildPage()

/** Screenshots of each state, kept as test artifacts (an ignored folder). */
export const ARTIFACTS = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'test-artifacts',
  'admin-page',
)

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js')

/** What the page did that it must not: CSP violations, console errors, uncaught errors. */
export interface PageFaults {
  readonly violations: string[]
  readonly errors: string[]
}

/**
 * A fresh headless Chromium (its own profile) at the admin page, its faults recorded from the
 * first byte: CSP violations reported by the page (securitypolicyviolation, listened for before any
 * script of the page runs) and by the console, console errors, uncaught exceptions.
 */
export async function openAdmin(
  t: TestContext,
  pageUrl: string,
): Promise<{ page: Page; faults: PageFaults; context: BrowserContext }> {
  const profile = await mkdtemp(path.join(tmpdir(), 'user-service-admin-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    timeout: 60_000,
    viewport: { width: 1100, height: 800 },
  })
  t.after(async () => {
    await context.close()
    await rm(profile, { recursive: true, force: true })
  })
  const faults: PageFaults = { violations: [], errors: [] }
  await context.exposeFunction('reportViolation', (text: string) => {
    faults.violations.push(text)
  })
  // A string, run in the page before its own scripts (this file's code is not the page's).
  await context.addInitScript(
    "document.addEventListener('securitypolicyviolation', (event) => { " +
      "window.reportViolation(event.violatedDirective + ' ' + event.blockedURI) })",
  )
  const page = context.pages()[0] ?? (await context.newPage())
  page.on('console', (message) => {
    if (message.type() === 'error') faults.errors.push(message.text())
    if (/Content Security Policy/i.test(message.text())) faults.violations.push(message.text())
  })
  page.on('pageerror', (error) => {
    faults.errors.push(`uncaught: ${error.message}`)
  })
  const loaded = await page.goto(pageUrl)
  assert.equal(loaded?.status(), 200)
  return { page, faults, context }
}

/**
 * The page ran clean: no CSP violation ever, and no console error but the network's own note of
 * each error status the test provoked on purpose (Chromium logs every 4xx a fetch receives).
 */
export function assertClean(faults: PageFaults, expectedStatuses: readonly number[] = []): void {
  assert.deepEqual(faults.violations, [])
  const unexpected = faults.errors.filter((text) => {
    const status = /the server responded with a status of (\d{3})/.exec(text)?.[1]
    return status === undefined || !expectedStatuses.includes(Number(status))
  })
  assert.deepEqual(unexpected, [])
}

/** Signs in with a token, through the form, and waits for the list. */
export async function signIn(page: Page, token: string): Promise<void> {
  await page.getByLabel('Token', { exact: true }).fill(token)
  await page.getByRole('button', { name: 'Sign in', exact: true }).click()
  await page.getByRole('table', { name: 'Users' }).waitFor()
}

interface AxeResult {
  violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[]
}

/**
 * axe-core's default rules on the page as it is: 0 violations. The script is injected through
 * the DevTools protocol, which the page's CSP does not govern (it is the test's, not the page's).
 */
export async function assertAccessible(page: Page, state: string): Promise<void> {
  const source = await readFile(AXE, 'utf8')
  await page.evaluate(source)
  const result = (await page.evaluate('axe.run(document)')) as AxeResult
  const found = result.violations.map(
    (item) =>
      `${item.id} (${item.impact}): ${item.help} at ${item.nodes.map((n) => n.target.join(' ')).join(', ')}`,
  )
  assert.deepEqual(found, [], `axe-core on ${state}`)
}

/** Saves a screenshot of the state as a test artifact. */
export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(ARTIFACTS, { recursive: true })
  const file = path.join(ARTIFACTS, `${name}.png`)
  await page.screenshot({ path: file, fullPage: true })
  return file
}

/**
 * A TCP proxy in front of the service, for the page to reach it through: while cut, it closes
 * every connection carrying an event stream (`GET /events` asking for text/event-stream) at once,
 * as a dropped network would, and lets everything else through.
 */
export async function streamCutter(
  t: TestContext,
  target: string,
): Promise<{ url: string; cut: (on: boolean) => void }> {
  const { hostname, port } = new URL(target)
  const streams = new Set<Socket>()
  const open = new Set<Socket>()
  let cutting = false
  const server = createServer((client) => {
    const upstream = connect(Number(port), hostname)
    open.add(client)
    const drop = (): void => {
      streams.delete(client)
      open.delete(client)
      client.destroy()
      upstream.destroy()
    }
    client.on('data', (chunk: Buffer) => {
      const head = chunk.toString('latin1')
      if (/^GET [^ ]*\/events /.test(head) && /\r\naccept: text\/event-stream\r\n/i.test(head)) {
        if (cutting) return drop()
        streams.add(client)
      }
      upstream.write(chunk)
    })
    upstream.pipe(client)
    client.on('close', drop)
    upstream.on('close', drop)
    client.on('error', drop)
    upstream.on('error', drop)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => {
    for (const socket of open) socket.destroy()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  const address = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${address.port}`,
    cut(on) {
      cutting = on
      if (on) for (const socket of [...streams]) socket.destroy()
    },
  }
}
