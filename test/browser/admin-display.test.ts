import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { Locator, Page } from 'playwright-core'

import { assertClean, openAdmin, SKIP, signIn } from '../helpers/admin-browser.js'
import { startService } from '../helpers/service.js'
import { ALL_SCOPES, makeToken } from '../helpers/tokens.js'

const LIVE_SCOPES = `${ALL_SCOPES} events:read`
const RLO = '\u202E'

/** Whether an element's text is shown in a bidi isolate of its own (a `<bdi>`, or isolating CSS). */
function isIsolated(locator: Locator): Promise<boolean> {
  return locator.evaluate(
    (element) => {
      // Reached through the element: this project's TypeScript has no DOM globals.
      const bidi = element.ownerDocument.defaultView?.getComputedStyle(element).unicodeBidi
      return element.tagName === 'BDI' || bidi === 'isolate' || bidi === 'isolate-override'
    },
    undefined,
    { timeout: 2000 },
  )
}

/** Where on the screen a piece of an element's text is drawn: its left edge. */
function leftOf(locator: Locator, piece: string): Promise<number> {
  return locator.evaluate((element, text) => {
    const page = element.ownerDocument
    // 4: NodeFilter.SHOW_TEXT.
    const walker = page.createTreeWalker(element, 4)
    for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
      const at = node.textContent?.indexOf(text) ?? -1
      if (at === -1) continue
      const range = page.createRange()
      range.setStart(node, at)
      range.setEnd(node, at + text.length)
      return range.getBoundingClientRect().left
    }
    throw new Error(`no text ${text}`)
  }, piece)
}

/** The page is no wider than its window: nothing to scroll sideways. */
async function assertNoSidewaysScroll(page: Page): Promise<void> {
  const widths = (await page.evaluate(
    '({ content: document.documentElement.scrollWidth, window: window.innerWidth })',
  )) as { content: number; window: number }
  assert.ok(widths.content <= widths.window, `${widths.content} px wide in ${widths.window}`)
}

describe('the admin page showing what users typed', { skip: SKIP, timeout: 300_000 }, () => {
  it('isolates text with bidi controls in the list, the detail and the confirmation, so that it reorders nothing around it', async (t) => {
    const s = await startService(t)
    const email = `mallory${RLO}moc.elpmaxe@ecila.example.com`
    const user = await s.createUser({
      email,
      name: `Mallory ${RLO}lanoitan`,
      metadata: { a: `x${RLO}yz`, team: 'ops' },
    })
    const stored = await s.snapshot()
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    await signIn(page, makeToken({ scope: LIVE_SCOPES }))

    const link = page.getByRole('button', { name: email, exact: true })
    assert.equal(await isIsolated(link.locator('*').first()), true)
    const nameCell = page.locator('#users-body td').nth(1)
    assert.equal(await nameCell.textContent(), user.name)
    assert.equal(await isIsolated(nameCell.locator('*').first()), true)

    await link.click()
    const detail = page.getByRole('region', { name: 'User details' })
    await detail.getByText(user.id, { exact: true }).waitFor()
    const values = detail.locator('dd')
    assert.equal(await isIsolated(values.nth(1).locator('*').first()), true)
    assert.equal(await values.nth(1).textContent(), email)
    // Metadata: each key and value isolated, so the override in "a" leaves "team" where it is.
    const metadata = values.nth(4)
    assert.equal(await metadata.textContent(), JSON.stringify(user.metadata))
    const pieces = metadata.locator('*')
    assert.deepEqual(await pieces.allTextContents(), ['"a"', `"x${RLO}yz"`, '"team"', '"ops"'])
    for (let i = 0; i < 4; i += 1) assert.equal(await isIsolated(pieces.nth(i)), true)
    assert.ok((await leftOf(metadata, '"team"')) > (await leftOf(metadata, '"a"')))
    assert.ok((await leftOf(metadata, '"ops"')) > (await leftOf(metadata, '"team"')))

    // The confirmation: "Delete <email>?", the question mark after the email, not inside it.
    await detail.getByRole('button', { name: 'Delete', exact: true }).click()
    const title = page.locator('#confirm-title')
    await title.waitFor()
    assert.equal(await title.textContent(), `Delete ${email}?`)
    assert.equal(await isIsolated(title.locator('*').first()), true)
    assert.ok((await leftOf(title, '?')) > (await leftOf(title, 'mallory')))
    await page.keyboard.press('Escape')
    await title.waitFor({ state: 'hidden' })
    assert.deepEqual(await s.snapshot(), stored)
    assertClean(faults)
  })

  it('shows tokensValidAfter once the user has one, and breaks a long name rather than widen the page', async (t) => {
    const s = await startService(t)
    const name = 'N'.repeat(150)
    const user = await s.createUser({ name })
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    await signIn(page, makeToken({ scope: LIVE_SCOPES }))
    await page.getByRole('status').getByText('Live updates: on', { exact: true }).waitFor()
    await assertNoSidewaysScroll(page)

    await page.getByRole('button', { name: user.email, exact: true }).click()
    const detail = page.getByRole('region', { name: 'User details' })
    await detail.getByText(user.id, { exact: true }).waitFor()
    await assertNoSidewaysScroll(page)
    assert.equal(await detail.getByText('tokensValidAfter', { exact: true }).count(), 0)

    // Revoked elsewhere while the detail is open: the change shows it; opened again, it is there.
    const revoked = await s.call('POST', `/users/${user.id}:revokeTokens`)
    assert.equal(revoked.status, 200)
    const after = revoked.json<{ tokensValidAfter: string }>().tokensValidAfter
    assert.match(after, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/)
    await detail.getByText('tokensValidAfter', { exact: true }).waitFor({ timeout: 2000 })
    const labels = await detail.locator('dt').allTextContents()
    const values = await detail.locator('dd').allTextContents()
    assert.equal(values[labels.indexOf('tokensValidAfter')], after)
    await page.reload()
    await page.getByRole('button', { name: user.email, exact: true }).click()
    await detail.getByText(after, { exact: true }).waitFor()
    assertClean(faults)
  })
})
