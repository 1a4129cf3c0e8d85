import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { assertClean, openAdmin, SKIP, signIn } from '../helpers/admin-browser.js'
import { startService } from '../helpers/service.js'
import { ALL_SCOPES, makeToken } from '../helpers/tokens.js'

describe('the admin page opening users one after another', { skip: SKIP, timeout: 300_000 }, () => {
  it('shows the user opened last, whichever answer arrives last, and nothing once signed out', async (t) => {
    const s = await startService(t)
    const slow = await s.createUser({ email: 'slow@example.com' })
    await s.createUser({ email: 'fast@example.com' })
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    await signIn(page, makeToken({ scope: ALL_SCOPES }))
    // The first user's answer is held back, as a slow network would.
    await page.route(`**/users/${slow.id}`, async (route) => {
      await new Promise((resolve) => setTimeout(resolve, 1000))
      await route.continue().catch(() => undefined)
    })
    await page.getByRole('button', { name: 'slow@example.com', exact: true }).click()
    await page.getByRole('button', { name: 'fast@example.com', exact: true }).click()
    const detail = page.getByRole('region', { name: 'User details' })
    await detail.getByText('fast@example.com', { exact: true }).waitFor()
    await page.waitForTimeout(1500)
    assert.equal(await detail.locator('dd').nth(1).textContent(), 'fast@example.com')

    // An open still on its way at a sign-out shows nothing after it.
    await page.getByRole('button', { name: 'slow@example.com', exact: true }).click()
    await page.getByRole('button', { name: 'Sign out', exact: true }).click()
    await page.waitForTimeout(1500)
    assert.equal(await page.locator('#detail').isHidden(), true)
    assert.equal(await page.locator('#detail-fields').textContent(), '')
    assertClean(faults, [403])
  })
})
