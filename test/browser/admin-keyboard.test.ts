import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { Page } from 'playwright-core'

import { assertClean, openAdmin, SKIP } from '../helpers/admin-browser.js'
import { startService, uniqueEmail } from '../helpers/service.js'
import { ALL_SCOPES, makeToken } from '../helpers/tokens.js'

/** The focused element: its tag, its text or label, and whether a dialog holds it. */
async function focused(page: Page): Promise<{ name: string; inDialog: string | null }> {
  return (await page.evaluate(
    `(() => { const el = document.activeElement;
      const label = el.labels && el.labels[0] ? el.labels[0].textContent : '';
      const dialog = el.closest('dialog');
      return { name: (label || el.textContent || '').trim(), inDialog: dialog ? dialog.id : null } })()`,
  )) as { name: string; inDialog: string | null }
}

/** The focused element is visibly marked: an outline of at least 2 px. */
async function assertFocusVisible(page: Page): Promise<void> {
  const outline = (await page.evaluate(
    `(() => { const s = getComputedStyle(document.activeElement);
      return { style: s.outlineStyle, width: parseFloat(s.outlineWidth) } })()`,
  )) as { style: string; width: number }
  assert.notEqual(outline.style, 'none', 'the focused control has an outline')
  assert.ok(outline.width >= 2, `outline ${outline.width}px`)
}

/** Presses Tab (or Shift+Tab) until the control named `name` has the focus. */
async function tabTo(page: Page, name: string, key = 'Tab'): Promise<void> {
  for (let i = 0; i < 40; i += 1) {
    if ((await focused(page)).name === name) {
      await assertFocusVisible(page)
      return
    }
    await page.keyboard.press(key)
  }
  assert.fail(`${key} never reached ${name}`)
}

describe('the admin page with the keyboard alone', { skip: SKIP, timeout: 300_000 }, () => {
  it('signs in, searches, pages, opens a user, edits, confirms or cancels in trapped dialogs, creates, deletes and signs out', async (t) => {
    const s = await startService(t)
    const users = []
    for (let i = 0; i < 21; i += 1) users.push(await s.createUser({ name: `Keyboard ${i}` }))
    const target = users[20]
    assert.ok(target !== undefined)
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)

    // Sign in: Tab to the token, type it, Enter.
    await tabTo(page, 'Token')
    await page.keyboard.type(makeToken({ scope: `${ALL_SCOPES} events:read` }))
    await page.keyboard.press('Enter')
    await page.getByRole('table', { name: 'Users' }).waitFor()
    await page.getByRole('button', { name: target.email, exact: true }).waitFor()
    assert.equal((await focused(page)).name, 'Search')
    await assertFocusVisible(page)

    // Paging: Next page, then Previous page, by Enter and Space.
    await tabTo(page, 'Next page')
    await page.keyboard.press('Enter')
    await page.getByRole('button', { name: users[0]?.email ?? '', exact: true }).waitFor()
    // Next page turned off under the focus: the focus went to Previous page.
    assert.equal((await focused(page)).name, 'Previous page')
    await page.keyboard.press('Space')
    await page.getByRole('button', { name: target.email, exact: true }).waitFor()

    // Search: type, Enter.
    await tabTo(page, 'Search', 'Shift+Tab')
    await page.keyboard.type('keyboard 20')
    await page.keyboard.press('Enter')
    await page.locator('#users-body tr').nth(1).waitFor({ state: 'detached' })

    // Open the user: Enter on its email; the focus goes to the detail.
    await tabTo(page, target.email)
    await page.keyboard.press('Enter')
    const detail = page.getByRole('region', { name: 'User details' })
    await detail.getByText(target.id, { exact: true }).waitFor()
    assert.equal((await focused(page)).name, 'User details')

    // A confirmation dialog takes the focus, keeps it inside, closes on Escape, gives it back.
    await tabTo(page, 'Activate')
    await page.keyboard.press('Space')
    const confirm = page.getByRole('dialog', { name: `Activate ${target.email}?` })
    await confirm.waitFor()
    assert.deepEqual(await focused(page), { name: 'Activate', inDialog: 'confirm' })
    await page.keyboard.press('Tab')
    assert.deepEqual(await focused(page), { name: 'Cancel', inDialog: 'confirm' })
    await page.keyboard.press('Tab')
    assert.deepEqual(await focused(page), { name: 'Activate', inDialog: 'confirm' })
    await page.keyboard.press('Shift+Tab')
    assert.deepEqual(await focused(page), { name: 'Cancel', inDialog: 'confirm' })
    await page.keyboard.press('Escape')
    await confirm.waitFor({ state: 'hidden' })
    assert.deepEqual(await focused(page), { name: 'Activate', inDialog: null })
    assert.equal((await s.getUser(target.id)).status, 'pending')
    await page.keyboard.press('Enter')
    await confirm.waitFor()
    assert.deepEqual(await focused(page), { name: 'Activate', inDialog: 'confirm' })
    await page.keyboard.press('Enter')
    await confirm.waitFor({ state: 'hidden' })
    await detail.getByText('active', { exact: true }).waitFor()
    assert.equal((await s.getUser(target.id)).status, 'active')

    // Edit: Enter on Edit, type, Enter saves.
    await tabTo(page, 'Edit', 'Shift+Tab')
    await page.keyboard.press('Enter')
    assert.equal((await focused(page)).name, 'Email')
    await page.keyboard.press('Tab')
    assert.equal((await focused(page)).name, 'Name')
    await page.keyboard.press('End')
    await page.keyboard.type(' (edited)')
    await page.keyboard.press('Enter')
    await detail.getByText('Keyboard 20 (edited)', { exact: true }).waitFor()
    assert.equal((await s.getUser(target.id)).name, 'Keyboard 20 (edited)')
    assert.equal((await focused(page)).name, 'Edit')

    // New user: the dialog traps the focus, Escape closes it, then Space opens it and Enter creates.
    await tabTo(page, 'New user', 'Shift+Tab')
    await page.keyboard.press('Enter')
    const dialog = page.getByRole('dialog', { name: 'New user' })
    await dialog.waitFor()
    assert.deepEqual(await focused(page), { name: 'Email', inDialog: 'new-user-dialog' })
    for (const name of ['Name', 'Metadata', 'Create', 'Cancel', 'Email']) {
      await page.keyboard.press('Tab')
      assert.deepEqual(await focused(page), { name, inDialog: 'new-user-dialog' })
    }
    await page.keyboard.press('Shift+Tab')
    assert.deepEqual(await focused(page), { name: 'Cancel', inDialog: 'new-user-dialog' })
    await page.keyboard.press('Escape')
    await dialog.waitFor({ state: 'hidden' })
    assert.deepEqual(await focused(page), { name: 'New user', inDialog: null })
    await page.keyboard.press('Space')
    await dialog.waitFor()
    const email = uniqueEmail('keys')
    await page.keyboard.type(email)
    await page.keyboard.press('Tab')
    await page.keyboard.type('Typed Alone')
    await page.keyboard.press('Enter')
    await dialog.waitFor({ state: 'hidden' })
    await detail.getByText(email, { exact: true }).waitFor()
    const created = (await s.snapshot()).find((user) => user.email === email)
    assert.equal(created?.name, 'Typed Alone')

    // Delete: Cancel by Space changes nothing; then Enter, Enter deletes.
    await tabTo(page, 'Delete')
    await page.keyboard.press('Enter')
    const remove = page.getByRole('dialog', { name: `Delete ${email}?` })
    await remove.waitFor()
    await page.keyboard.press('Tab')
    await page.keyboard.press('Space')
    await remove.waitFor({ state: 'hidden' })
    assert.deepEqual(await focused(page), { name: 'Delete', inDialog: null })
    assert.equal(
      (await s.snapshot()).some((user) => user.email === email),
      true,
    )
    await page.keyboard.press('Enter')
    await remove.waitFor()
    await page.keyboard.press('Enter')
    await detail.waitFor({ state: 'hidden' })
    assert.equal(
      (await s.snapshot()).some((user) => user.email === email),
      false,
    )
    assert.equal((await focused(page)).name, 'New user')

    // Sign out.
    await tabTo(page, 'Sign out', 'Shift+Tab')
    await page.keyboard.press('Enter')
    await page.getByLabel('Token', { exact: true }).waitFor()
    assert.equal((await focused(page)).name, 'Token')
    assertClean(faults)
  })
})
