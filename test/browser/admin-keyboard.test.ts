import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { Locator, Page } from 'playwright-core'

import { assertClean, openAdmin, SKIP } from '../helpers/admin-browser.js'
import type { Problem } from '../helpers/http.js'
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

/** Signs in by the keyboard alone: Tab to the Token field, type a token with `scope`, Enter. */
async function signInByKeyboard(page: Page, scope: string): Promise<void> {
  await tabTo(page, 'Token')
  await page.keyboard.type(makeToken({ scope }))
  await page.keyboard.press('Enter')
}

/** Opens the user's detail from its row by the keyboard, and returns the detail's region. */
async function openByKeyboard(page: Page, user: { email: string; id: string }): Promise<Locator> {
  await tabTo(page, user.email)
  await page.keyboard.press('Enter')
  const detail = page.getByRole('region', { name: 'User details' })
  await detail.getByText(user.id, { exact: true }).waitFor()
  return detail
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
    await signInByKeyboard(page, `${ALL_SCOPES} events:read`)
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
  it('suspends (confirmed by Space), shows field errors after Save, reloads after a 412, and cancels an edit and the New user dialog by their Cancel buttons', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ name: 'Keyboard Suspend', metadata: { team: 'keys' } })
    assert.equal((await s.call('POST', `/users/${user.id}:activate`)).status, 200)
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    await signInByKeyboard(page, `${ALL_SCOPES} events:read`)
    await page.getByRole('table', { name: 'Users' }).waitFor()
    const detail = await openByKeyboard(page, user)
    const status = detail.locator('dd').nth(3)
    assert.equal(await status.textContent(), 'active')

    // Suspend: Space opens the dialog, Space on its Suspend button confirms.
    await tabTo(page, 'Suspend')
    await page.keyboard.press('Space')
    const confirm = page.getByRole('dialog', { name: `Suspend ${user.email}?` })
    await confirm.waitFor()
    assert.deepEqual(await focused(page), { name: 'Suspend', inDialog: 'confirm' })
    await page.keyboard.press('Space')
    await confirm.waitFor({ state: 'hidden' })
    await detail.getByText('suspended', { exact: true }).waitFor()
    assert.equal(await status.textContent(), 'suspended')
    assert.equal((await s.getUser(user.id)).status, 'suspended')
    assert.deepEqual(await focused(page), { name: 'Suspend', inDialog: null })
    const suspended = await s.getUser(user.id)

    // Field errors after a Save by Enter: at the field, which gets the focus.
    const shown = await s.call('GET', `/users/${user.id}`)
    assert.equal(shown.status, 200)
    const refused = await s.call('PUT', `/users/${user.id}`, {
      json: { email: 'broken', name: user.name, metadata: user.metadata },
      headers: { 'if-match': shown.headers.get('etag') ?? '' },
    })
    assert.equal(refused.status, 422)
    assert.equal(refused.json<Problem>().code, 'validation_failed')
    const message = refused.json<Problem>().errors?.find((e) => e.pointer === '/email')?.message
    await tabTo(page, 'Edit', 'Shift+Tab')
    await page.keyboard.press('Enter')
    assert.equal((await focused(page)).name, 'Email')
    await page.keyboard.press('Control+a')
    await page.keyboard.type('broken')
    await page.keyboard.press('Enter')
    const email = page.locator('#edit-email')
    await page.locator('#edit-email[aria-invalid="true"]').waitFor()
    const describedBy = (await email.getAttribute('aria-describedby')) ?? ''
    assert.equal(await page.locator(`#${describedBy}`).textContent(), message)
    assert.equal((await focused(page)).name, 'Email')
    assert.deepEqual(await s.getUser(user.id), suspended)

    // A change made elsewhere meanwhile: Enter saves into the 412; the focus is on Reload, and
    // Enter on it loads the current user into the form.
    await page.keyboard.press('Control+a')
    await page.keyboard.type(user.email)
    await page.keyboard.press('Tab')
    await page.keyboard.press('End')
    await page.keyboard.type(' (mine)')
    assert.equal(
      (await s.call('PATCH', `/users/${user.id}`, { json: { name: 'Theirs' } })).status,
      200,
    )
    await page.keyboard.press('Enter')
    await detail
      .getByRole('alert')
      .getByText(/changed meanwhile/)
      .waitFor()
    assert.equal((await focused(page)).name, 'Reload')
    await assertFocusVisible(page)
    await page.keyboard.press('Enter')
    await detail
      .getByRole('alert')
      .getByText(/changed meanwhile/)
      .waitFor({ state: 'detached' })
    assert.equal(await page.locator('#edit-name').inputValue(), 'Theirs')
    assert.equal(await email.getAttribute('aria-invalid'), null)
    assert.equal((await focused(page)).name, 'Email')
    const theirs = await s.getUser(user.id)
    assert.equal(theirs.name, 'Theirs')

    // Edit's Cancel, by Space: the form closes, the detail shows the stored user, nothing is sent.
    const writes: string[] = []
    page.on('request', (request) => {
      if (request.method() !== 'GET') writes.push(`${request.method()} ${request.url()}`)
    })
    await page.keyboard.press('Tab')
    await page.keyboard.type(' (not kept)')
    await tabTo(page, 'Cancel')
    await page.keyboard.press('Space')
    await page.locator('#edit-form').waitFor({ state: 'hidden' })
    assert.deepEqual(await focused(page), { name: 'Edit', inDialog: null })
    await detail.getByText('Theirs', { exact: true }).waitFor()
    assert.deepEqual(await s.getUser(user.id), theirs)
    assert.deepEqual(writes, [])

    // The New user dialog's Cancel button, by Enter: it closes, gives the focus back, creates nothing.
    await tabTo(page, 'New user', 'Shift+Tab')
    await page.keyboard.press('Enter')
    const dialog = page.getByRole('dialog', { name: 'New user' })
    await dialog.waitFor()
    await page.keyboard.type(uniqueEmail('cancelled'))
    await page.keyboard.press('Tab')
    await page.keyboard.type('Never Created')
    await tabTo(page, 'Cancel')
    assert.deepEqual(await focused(page), { name: 'Cancel', inDialog: 'new-user-dialog' })
    await page.keyboard.press('Enter')
    await dialog.waitFor({ state: 'hidden' })
    assert.deepEqual(await focused(page), { name: 'New user', inDialog: null })
    // A list read follows any write the page makes: once it is in, nothing else was sent.
    await page.reload()
    await page.getByRole('button', { name: user.email, exact: true }).waitFor()
    assert.deepEqual(writes, [])
    assert.deepEqual(
      (await s.snapshot()).map((stored) => stored.id),
      [user.id],
    )
    assertClean(faults, [412, 422])
  })

  it('keeps the focus in the detail after a 412 on Delete is reloaded, and when its user is deleted elsewhere', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ name: 'Keyboard Stale' })
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    // Without events:read: the detail does not follow the change made elsewhere, and meets it.
    await signInByKeyboard(page, ALL_SCOPES)
    await page.getByRole('table', { name: 'Users' }).waitFor()
    const detail = await openByKeyboard(page, user)
    assert.equal(
      (await s.call('PATCH', `/users/${user.id}`, { json: { name: 'Changed Elsewhere' } })).status,
      200,
    )
    const changed = await s.getUser(user.id)

    // Delete, confirmed by Enter: a 412; no form is open, and the alert speaks of none.
    await tabTo(page, 'Delete')
    await page.keyboard.press('Enter')
    await page.getByRole('dialog', { name: `Delete ${user.email}?` }).waitFor()
    await page.keyboard.press('Enter')
    const alert = detail.getByRole('alert')
    await alert.getByText(/changed meanwhile/).waitFor()
    assert.equal((await focused(page)).name, 'Reload')
    assert.doesNotMatch((await alert.textContent()) ?? '', /form/)
    await page.keyboard.press('Enter')
    await detail.getByText('Changed Elsewhere', { exact: true }).waitFor()
    assert.equal(await page.locator('#detail-alert').textContent(), '')
    assert.equal(await page.evaluate('document.activeElement.closest("#detail") !== null'), true)
    assert.equal((await focused(page)).name, 'User details')
    assert.deepEqual(await s.getUser(user.id), changed)

    // Live, with the focus on Edit: the user deleted elsewhere takes the actions away, not the focus.
    await tabTo(page, 'Sign out', 'Shift+Tab')
    await page.keyboard.press('Enter')
    await signInByKeyboard(page, `${ALL_SCOPES} events:read`)
    await page.getByRole('status').getByText('Live updates: on', { exact: true }).waitFor()
    await openByKeyboard(page, user)
    await tabTo(page, 'Edit')
    assert.equal((await s.call('DELETE', `/users/${user.id}`)).status, 204)
    await alert.getByText('This user was deleted meanwhile.', { exact: true }).waitFor()
    assert.equal(await page.locator('#detail-actions').isHidden(), true)
    assert.equal(await page.evaluate('document.activeElement.closest("#detail") !== null'), true)
    assert.equal((await focused(page)).name, 'User details')
    // The 412 asked for, and the first token's feed (no events:read).
    assertClean(faults, [403, 412])
  })
})
