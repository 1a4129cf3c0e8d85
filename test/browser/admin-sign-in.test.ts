import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { Page } from 'playwright-core'

import { assertClean, openAdmin, SKIP, signIn } from '../helpers/admin-browser.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { ALL_SCOPES, makeToken } from '../helpers/tokens.js'

const LIVE_SCOPES = `${ALL_SCOPES} events:read`

/** The event streams the service holds open, from its metrics. */
async function openStreams(s: TestService): Promise<number> {
  const text = (await s.call('GET', `${s.url}/metrics`)).text
  return Number(/^user_service_event_streams (\d+)$/m.exec(text)?.[1] ?? 'NaN')
}

/** Waits until the service holds `count` streams, then a moment more, and answers how many. */
async function settledStreams(s: TestService, count: number): Promise<number> {
  for (let waited = 0; waited < 5000 && (await openStreams(s)) !== count; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  // A second stream on its way would show within this.
  await new Promise((resolve) => setTimeout(resolve, 750))
  return openStreams(s)
}

async function focusedId(page: Page): Promise<string> {
  return (await page.evaluate('document.activeElement.id')) as string
}

describe('the admin page signing in', { skip: SKIP, timeout: 300_000 }, () => {
  it('opens one event stream for a double-clicked Sign in or Enter pressed twice, and sends nothing after Sign out', async (t) => {
    const s = await startService(t)
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    const token = makeToken({ scope: LIVE_SCOPES })
    const sent: string[] = []
    let signedOut = false
    page.on('request', (request) => {
      if (signedOut) sent.push(`${request.method()} ${request.url()}`)
    })
    const status = page.getByRole('status')
    const signOut = page.getByRole('button', { name: 'Sign out', exact: true })

    for (const submit of ['double click', 'Enter twice'] as const) {
      signedOut = false
      const field = page.getByLabel('Token', { exact: true })
      await field.fill(token)
      if (submit === 'double click') {
        await page.getByRole('button', { name: 'Sign in', exact: true }).dblclick()
      } else {
        await field.press('Enter')
        await field.press('Enter')
      }
      await status.getByText('Live updates: on', { exact: true }).waitFor()
      assert.equal(await settledStreams(s, 1), 1, `one stream after a ${submit}`)

      signedOut = true
      await signOut.click()
      await page.getByLabel('Token', { exact: true }).waitFor()
      assert.equal(await settledStreams(s, 0), 0, `no stream after the sign-out (${submit})`)
      await s.createUser({ name: `Made Elsewhere after a ${submit}` })
      await new Promise((resolve) => setTimeout(resolve, 1000))
      assert.deepEqual(sent, [], `nothing sent after the sign-out (${submit})`)
      assert.equal(await page.evaluate('sessionStorage.length'), 0)
    }
    assertClean(faults)
  })

  it('says so when the service cannot be reached or the token cannot be sent, keeps no such token, and gives the focus back to Token', async (t) => {
    const s = await startService(t)
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    const alert = page.locator('#sign-in-alert[role="alert"]')
    const field = page.getByLabel('Token', { exact: true })
    const token = makeToken({ scope: LIVE_SCOPES })

    // A 401 first: its alert must not outlive the next attempt.
    await field.fill(makeToken({ ttl: -600 }))
    await field.press('Enter')
    await alert.getByText('Token expired', { exact: true }).waitFor()

    // Connection refused: said in the alert, the token not kept, the focus on Token.
    await page.route('**/users?**', (route) => route.abort('connectionrefused'))
    await field.fill(token)
    await page.getByRole('button', { name: 'Sign in', exact: true }).click()
    await alert.getByText(/could not be reached/).waitFor()
    assert.equal(await alert.getByText('Token expired', { exact: true }).count(), 0)
    assert.equal(await page.evaluate('sessionStorage.length'), 0)
    assert.equal(await focusedId(page), 'token')
    await page.reload()
    await field.waitFor()
    assert.equal(await page.getByRole('table', { name: 'Users' }).isVisible(), false)
    await page.unroute('**/users?**')

    // A token a header cannot carry (a copy cut short with "…"): said, not kept, nothing thrown.
    await field.fill(`${token.slice(0, 40)}…`)
    await field.press('Enter')
    await alert.getByText(/cannot carry/).waitFor()
    assert.equal(await page.evaluate('sessionStorage.length'), 0)
    assert.equal(await focusedId(page), 'token')
    await page.reload()
    await field.waitFor()
    assert.equal(await alert.textContent(), '')

    // Signed in, then the network drops: a read says nothing is known to have changed, a write
    // that its outcome is unknown; the next list that arrives takes the alert away.
    await signIn(page, token)
    const pageAlert = page.locator('#page-alert[role="alert"]')
    await page.route('**/users?**', (route) => route.abort('connectionrefused'))
    const search = page.getByRole('searchbox', { name: 'Search' })
    await search.fill('nobody')
    await search.press('Enter')
    await pageAlert.getByText(/could not be reached\. Nothing is known to have changed/).waitFor()
    await page.unroute('**/users?**')
    await search.fill('')
    await search.press('Enter')
    await pageAlert.getByText(/could not be reached/).waitFor({ state: 'detached' })
    // So does a search the service refused (too long a q is a 400), once a later one succeeds.
    const tooLong = await s.call('GET', `/users?q=${'x'.repeat(201)}`)
    assert.equal(tooLong.status, 400)
    await search.fill('x'.repeat(201))
    await search.press('Enter')
    await pageAlert.getByText(tooLong.json<{ title: string }>().title, { exact: true }).waitFor()
    await search.fill('')
    await search.press('Enter')
    await pageAlert
      .getByText(tooLong.json<{ title: string }>().title)
      .waitFor({ state: 'detached' })

    await page.route('**/users', (route) =>
      route.request().method() === 'POST' ? route.abort('connectionrefused') : route.continue(),
    )
    await page.getByRole('button', { name: 'New user', exact: true }).click()
    const dialog = page.getByRole('dialog', { name: 'New user' })
    await dialog.getByLabel('Email', { exact: true }).fill(uniqueEmail('unsent'))
    await dialog.getByLabel('Name', { exact: true }).fill('Never Sent')
    await dialog.getByRole('button', { name: 'Create', exact: true }).click()
    await dialog
      .getByRole('alert')
      .getByText(/whether the change was made is unknown/)
      .waitFor()
    assert.equal(await page.evaluate('document.activeElement.textContent'), 'Create')
    assert.deepEqual(await s.snapshot(), [])
    assert.deepEqual(faults.violations, [])
    // The only errors: the 401 and 400 asked for, and the network's own notes of the refused requests.
    assert.deepEqual(
      faults.errors.filter((text) => !/net::ERR_/.test(text) && !/status of (400|401)/.test(text)),
      [],
    )
  })

  it('signs in with a token that lacks users:read: the list shows its 403, and New user still creates', async (t) => {
    const s = await startService(t)
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    await page.getByLabel('Token', { exact: true }).fill(makeToken({ scope: 'users:write' }))
    await page.getByRole('button', { name: 'Sign in', exact: true }).click()
    const pageAlert = page.locator('#page-alert[role="alert"]')
    await pageAlert.getByText('This route needs the scope users:read.').waitFor()
    assert.equal(await page.locator('#sign-in-view').isHidden(), true)
    assert.equal(await page.evaluate('sessionStorage.length'), 1)

    await page.getByRole('button', { name: 'New user', exact: true }).click()
    const dialog = page.getByRole('dialog', { name: 'New user' })
    const email = uniqueEmail('writer')
    await dialog.getByLabel('Email', { exact: true }).fill(email)
    await dialog.getByLabel('Name', { exact: true }).fill('Written')
    await dialog.getByRole('button', { name: 'Create', exact: true }).click()
    await dialog.waitFor({ state: 'hidden' })
    const found = await s.call('GET', `/users?q=${encodeURIComponent(email)}`)
    assert.equal(found.json<{ items: unknown[] }>().items.length, 1)
    // The list, the new user's detail and the feed: each the service's own 403.
    assertClean(faults, [403])
  })
})
