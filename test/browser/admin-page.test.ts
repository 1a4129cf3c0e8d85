import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { Page, Request } from 'playwright-core'

import type { User } from '../../src/domain/user.js'
import {
  assertAccessible,
  assertClean,
  openAdmin,
  SKIP,
  screenshot,
  signIn,
  streamCutter,
} from '../helpers/admin-browser.js'
import type { Problem } from '../helpers/http.js'
import { startService, uniqueEmail } from '../helpers/service.js'
import { ALL_SCOPES, makeToken } from '../helpers/tokens.js'

const LIVE_SCOPES = `${ALL_SCOPES} events:read`

/** People for the list (and its screenshot in the docs), oldest first. */
const PEOPLE: [string, Record<string, string>][] = [
  ['Charles Babbage', { team: 'engines' }],
  ['Ada Lovelace', { team: 'analytics' }],
  ['Alan Turing', { team: 'research' }],
  ['Grace Hopper', { team: 'compilers' }],
  ['John von Neumann', {}],
  ['Claude Shannon', { team: 'research' }],
  ['Kathleen Booth', { team: 'compilers' }],
  ['Edsger Dijkstra', {}],
  ['Tony Hoare', { team: 'languages' }],
  ['Donald Knuth', { team: 'typesetting' }],
  ['Barbara Liskov', { team: 'languages' }],
  ['Frances Allen', { team: 'compilers' }],
  ['Niklaus Wirth', { team: 'languages' }],
  ['Margaret Hamilton', { team: 'flight' }],
  ['Ken Thompson', { team: 'systems' }],
  ['Dennis Ritchie', { team: 'systems' }],
  ['Radia Perlman', { team: 'networks' }],
  ['Vint Cerf', { team: 'networks' }],
  ['Sophie Wilson', { team: 'chips' }],
  ['Tim Berners-Lee', { team: 'web' }],
  ['Shafi Goldwasser', { team: 'crypto' }],
  ['Leslie Lamport', { team: 'distributed' }],
  ['Hedy Lamarr', { team: 'radio' }],
]

function row(page: Page, email: string) {
  return page
    .getByRole('row')
    .filter({ has: page.getByRole('button', { name: email, exact: true }) })
}

/**
 * Waits until a value read from the page is the one expected (page.waitForFunction would evaluate
 * a string, which the page's CSP rightly refuses).
 */
async function until<T>(read: () => Promise<T>, expected: T, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs
  let last = await read()
  while (last !== expected && Date.now() < end) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    last = await read()
  }
  assert.equal(last, expected)
}

/** The emails of the list's rows, top to bottom. */
async function shownEmails(page: Page): Promise<string[]> {
  return page.locator('#users-body button').allTextContents()
}

describe('the admin page in headless Chromium', { skip: SKIP, timeout: 300_000 }, () => {
  it('signs in with a token kept in sessionStorage alone, shows a 401 detail, lists newest first, searches, pages and signs out', async (t) => {
    const s = await startService(t)
    const created: User[] = []
    for (const [name, metadata] of PEOPLE) {
      const email = `${name.toLowerCase().replace(/[^a-z]+/g, '.')}@example.com`
      created.push(await s.createUser({ email, name, metadata }))
    }
    // A few active and suspended ones, as a real list has.
    for (const [index, verbs] of [
      [22, ['activate']],
      [20, ['activate', 'suspend']],
      [19, ['activate']],
      [16, ['activate']],
      [13, ['activate']],
    ] as const) {
      for (const verb of verbs) {
        const user = created[index]
        assert.ok(user !== undefined)
        assert.equal((await s.call('POST', `/users/${user.id}:${verb}`)).status, 200)
        created[index] = await s.getUser(user.id)
      }
    }
    const newest = [...created].reverse()
    const { page, faults, context } = await openAdmin(t, `${s.url}/admin`)
    // The token is typed into a password input, so that it is not shown on the screen.
    const tokenField = page.getByLabel('Token', { exact: true })
    assert.equal(await tokenField.evaluate((el) => el.tagName), 'INPUT')
    assert.equal(await tokenField.getAttribute('type'), 'password')
    await assertAccessible(page, 'the sign-in form')
    await screenshot(page, '1-sign-in')

    // A 401 shows the problem's detail, and nothing is kept.
    const expired = makeToken({ ttl: -600 })
    const refused = await s.call('GET', '/users', { token: expired })
    assert.equal(refused.status, 401)
    await page.getByLabel('Token', { exact: true }).fill(expired)
    await page.getByRole('button', { name: 'Sign in', exact: true }).click()
    const signInAlert = page.locator('#sign-in-alert[role="alert"]')
    await signInAlert.getByText(refused.json<Problem>().detail).waitFor()
    assert.equal(await page.evaluate('sessionStorage.length'), 0)

    const token = makeToken({ scope: LIVE_SCOPES })
    await signIn(page, token)
    await page.getByRole('status').getByText('Live updates: on', { exact: true }).waitFor()
    // The token lives in sessionStorage only: no localStorage, cookie, IndexedDB or URL holds it.
    assert.deepEqual(await page.evaluate('Object.values(sessionStorage)'), [token])
    assert.equal(await page.evaluate('localStorage.length'), 0)
    assert.deepEqual(await context.cookies(), [])
    assert.deepEqual(await page.evaluate('indexedDB.databases().then((dbs) => dbs.length)'), 0)
    assert.ok(!page.url().includes(token))

    // Newest first, 20 a page; the columns as named.
    const table = page.getByRole('table', { name: 'Users' })
    for (const column of ['Email', 'Name', 'Status', 'Updated']) {
      await table.getByRole('columnheader', { name: column, exact: true }).waitFor()
    }
    assert.deepEqual(
      await shownEmails(page),
      newest.slice(0, 20).map((user) => user.email),
    )
    const previous = page.getByRole('button', { name: 'Previous page', exact: true })
    const next = page.getByRole('button', { name: 'Next page', exact: true })
    assert.equal(await previous.isDisabled(), true)
    assert.equal(await next.isDisabled(), false)
    await assertAccessible(page, 'the list')
    await screenshot(page, '2-list')

    await next.click()
    await page.getByRole('button', { name: newest[20]?.email ?? '', exact: true }).waitFor()
    assert.deepEqual(
      await shownEmails(page),
      newest.slice(20).map((user) => user.email),
    )
    assert.equal(await next.isDisabled(), true)
    assert.equal(await previous.isDisabled(), false)
    await previous.click()
    await page.getByRole('button', { name: newest[0]?.email ?? '', exact: true }).waitFor()
    assert.equal(await previous.isDisabled(), true)

    // Search: sent as q (part of a name or an email, any case).
    await page.getByRole('searchbox', { name: 'Search' }).fill('AN')
    const expected = newest
      .filter((user) => `${user.name} ${user.email}`.toLowerCase().includes('an'))
      .map((user) => user.email)
    assert.ok(expected.length > 1 && expected.length < 20)
    await until(() => page.locator('#users-body tr').count(), expected.length)
    assert.deepEqual(await shownEmails(page), expected)
    assert.equal(await next.isDisabled(), true)

    // Sign out forgets the token and shows the sign-in form again.
    await page.getByRole('button', { name: 'Sign out', exact: true }).click()
    await page.getByLabel('Token', { exact: true }).waitFor()
    assert.equal(await page.evaluate('sessionStorage.length'), 0)
    assert.equal(await page.getByRole('table', { name: 'Users' }).count(), 0)
    await page.reload()
    await page.getByLabel('Token', { exact: true }).waitFor()
    assert.equal(await page.getByRole('table', { name: 'Users' }).isVisible(), false)
    assertClean(faults, [401])
  })

  it('shows a detail, creates, edits with If-Match, meets a 412 with Reload, and shows field errors and other problems', async (t) => {
    const s = await startService(t)
    const ada = await s.createUser({
      email: 'ada@example.com',
      name: 'Ada Lovelace',
      metadata: { team: 'analytics', floor: '3' },
    })
    const other = await s.createUser({ email: 'charles@example.com', name: 'Charles Babbage' })
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    await signIn(page, makeToken({ scope: LIVE_SCOPES }))

    // Detail: every field, and the actions.
    await page.getByRole('button', { name: ada.email, exact: true }).click()
    const detail = page.getByRole('region', { name: 'User details' })
    await detail.getByText(ada.id, { exact: true }).waitFor()
    const shown = await detail.locator('dd').allTextContents()
    assert.deepEqual(shown, [
      ada.id,
      ada.email,
      ada.name,
      'pending',
      '{"team":"analytics","floor":"3"}',
      '1',
      ada.createdAt,
      ada.updatedAt,
    ])
    assert.deepEqual(await detail.locator('dt').allTextContents(), [
      'id',
      'email',
      'name',
      'status',
      'metadata',
      'version',
      'createdAt',
      'updatedAt',
    ])
    for (const name of ['Edit', 'Activate', 'Suspend', 'Delete']) {
      await detail.getByRole('button', { name, exact: true }).waitFor()
    }
    // From pending, a suspend is a 409: the button is off.
    assert.equal(
      await detail.getByRole('button', { name: 'Suspend', exact: true }).isDisabled(),
      true,
    )
    await assertAccessible(page, 'a detail')
    await screenshot(page, '3-detail')

    // Create: a 422's field errors at their fields, described by the server's own messages.
    const bad = await s.call('POST', '/users', {
      json: { email: 'not an email', name: '', metadata: {} },
    })
    assert.equal(bad.status, 422)
    const badErrors = bad.json<Problem>().errors ?? []
    const dialog = page.getByRole('dialog', { name: 'New user' })
    // Cancel closes it and creates nothing.
    await page.getByRole('button', { name: 'New user', exact: true }).click()
    await dialog.getByLabel('Email', { exact: true }).fill(uniqueEmail('cancelled'))
    await dialog.getByLabel('Name', { exact: true }).fill('Cancelled')
    await dialog.getByRole('button', { name: 'Cancel', exact: true }).click()
    await dialog.waitFor({ state: 'hidden' })
    assert.equal((await s.snapshot()).length, 2)
    await page.getByRole('button', { name: 'New user', exact: true }).click()
    await dialog.waitFor()
    // Opened again: empty.
    assert.equal(await dialog.getByLabel('Name', { exact: true }).inputValue(), '')
    await assertAccessible(page, 'the New user form')
    await screenshot(page, '4-new-user')
    await dialog.getByLabel('Email', { exact: true }).fill('not an email')
    await dialog.getByRole('button', { name: 'Create', exact: true }).click()
    await page.locator('#new-email[aria-invalid="true"]').waitFor()
    for (const [field, pointer] of [
      ['Email', '/email'],
      ['Name', '/name'],
    ] as const) {
      const control = dialog.getByLabel(field, { exact: true })
      assert.equal(await control.getAttribute('aria-invalid'), 'true')
      const describedBy = (await control.getAttribute('aria-describedby')) ?? ''
      const message = badErrors.find((entry) => entry.pointer === pointer)?.message ?? '?'
      assert.equal(await page.locator(`#${describedBy}`).textContent(), message)
    }
    assert.equal(
      await dialog.getByLabel('Metadata', { exact: true }).getAttribute('aria-invalid'),
      null,
    )
    assert.equal(await page.evaluate('document.activeElement.id'), 'new-email')
    await assertAccessible(page, 'a form showing field errors')
    await screenshot(page, '5-field-errors')

    // Metadata must parse as JSON: the one check the page makes itself.
    await dialog.getByLabel('Metadata', { exact: true }).fill('{team: ops')
    await dialog.getByRole('button', { name: 'Create', exact: true }).click()
    await page.locator('#new-metadata[aria-invalid="true"]').waitFor()

    // A 409 (an email taken) goes to the alert with its title and detail.
    const taken = await s.call('POST', '/users', {
      json: { email: other.email, name: 'Charles Babbage' },
    })
    assert.equal(taken.status, 409)
    await dialog.getByLabel('Email', { exact: true }).fill(other.email)
    await dialog.getByLabel('Name', { exact: true }).fill('Charles Babbage')
    await dialog.getByLabel('Metadata', { exact: true }).fill('')
    await dialog.getByRole('button', { name: 'Create', exact: true }).click()
    const newAlert = dialog.getByRole('alert')
    await newAlert.getByText(taken.json<Problem>().title, { exact: true }).waitFor()
    await newAlert.getByText(taken.json<Problem>().detail, { exact: true }).waitFor()

    const grace = uniqueEmail('grace')
    await dialog.getByLabel('Email', { exact: true }).fill(grace)
    await dialog.getByLabel('Name', { exact: true }).fill('Grace Hopper')
    await dialog.getByLabel('Metadata', { exact: true }).fill('{"team": "navy"}')
    await dialog.getByRole('button', { name: 'Create', exact: true }).click()
    await dialog.waitFor({ state: 'hidden' })
    await detail.getByText(grace, { exact: true }).waitFor()
    await page.getByRole('button', { name: grace, exact: true }).waitFor()
    const stored = (await s.snapshot()).find((user) => user.email === grace)
    assert.equal(stored?.name, 'Grace Hopper')
    assert.deepEqual(stored?.metadata, { team: 'navy' })

    // Edit: PUT with If-Match; then a change made elsewhere meanwhile is a 412 with Reload.
    await page.getByRole('button', { name: ada.email, exact: true }).click()
    await detail.getByText(ada.id, { exact: true }).waitFor()
    await detail.getByRole('button', { name: 'Edit', exact: true }).click()
    assert.equal(await detail.getByLabel('Name', { exact: true }).inputValue(), 'Ada Lovelace')
    await detail.getByLabel('Name', { exact: true }).fill('Ada King')
    await detail.getByRole('button', { name: 'Save', exact: true }).click()
    await detail.getByText('Ada King', { exact: true }).waitFor()
    // The Metadata field left as it was keeps the stored metadata.
    const renamed = await s.getUser(ada.id)
    assert.equal(renamed.name, 'Ada King')
    assert.equal(renamed.version, 2)
    assert.deepEqual(renamed.metadata, { team: 'analytics', floor: '3' })

    // Metadata typed into the form is what is stored (a key left out of it is gone).
    await detail.getByRole('button', { name: 'Edit', exact: true }).click()
    const metadataField = detail.getByLabel('Metadata', { exact: true })
    assert.equal(await metadataField.inputValue(), '{"team":"analytics","floor":"3"}')
    await metadataField.fill('{"team": "engines", "desk": "12"}')
    await detail.getByRole('button', { name: 'Save', exact: true }).click()
    await detail.getByText('{"team":"engines","desk":"12"}', { exact: true }).waitFor()
    const remetadata = await s.getUser(ada.id)
    assert.deepEqual(remetadata.metadata, { team: 'engines', desk: '12' })
    assert.equal(remetadata.name, 'Ada King')
    assert.equal(remetadata.version, 3)

    // Cancel: the form closes, the detail shows the stored values again, and nothing is sent.
    const writes: string[] = []
    const onRequest = (request: Request): void => {
      if (request.method() !== 'GET') writes.push(`${request.method()} ${request.url()}`)
    }
    page.on('request', onRequest)
    await detail.getByRole('button', { name: 'Edit', exact: true }).click()
    await detail.getByLabel('Email', { exact: true }).fill(uniqueEmail('cancelled-edit'))
    await detail.getByLabel('Name', { exact: true }).fill('Not kept')
    await metadataField.fill('{"team": "nobody"}')
    await detail.getByRole('button', { name: 'Cancel', exact: true }).click()
    await page.locator('#edit-form').waitFor({ state: 'hidden' })
    assert.deepEqual(await detail.locator('dd').allTextContents(), [
      ada.id,
      ada.email,
      'Ada King',
      'pending',
      '{"team":"engines","desk":"12"}',
      '3',
      ada.createdAt,
      remetadata.updatedAt,
    ])
    for (const name of ['Edit', 'Activate', 'Suspend', 'Delete']) {
      assert.equal(await detail.getByRole('button', { name, exact: true }).isVisible(), true)
    }
    page.off('request', onRequest)
    assert.deepEqual(writes, [])
    assert.deepEqual(await s.getUser(ada.id), remetadata)

    await detail.getByRole('button', { name: 'Edit', exact: true }).click()
    await detail.getByLabel('Name', { exact: true }).fill('Lost update')
    const elsewhere = await s.call('PATCH', `/users/${ada.id}`, {
      json: { name: 'Countess of Lovelace' },
    })
    assert.equal(elsewhere.status, 200)
    await detail.getByRole('button', { name: 'Save', exact: true }).click()
    const conflict = detail.getByRole('alert')
    await conflict.getByText(/changed meanwhile/).waitFor()
    await screenshot(page, '6-conflict')
    assert.equal((await s.getUser(ada.id)).name, 'Countess of Lovelace')
    await conflict.getByRole('button', { name: 'Reload', exact: true }).click()
    await until(
      () => detail.getByLabel('Name', { exact: true }).inputValue(),
      'Countess of Lovelace',
    )
    assert.equal(await page.locator('#detail-alert').textContent(), '')
    await detail.getByLabel('Name', { exact: true }).fill('Ada, again')
    await detail.getByRole('button', { name: 'Save', exact: true }).click()
    await detail.getByText('Ada, again', { exact: true }).waitFor()
    assert.equal((await s.getUser(ada.id)).name, 'Ada, again')

    // A 422 on Save: at the field; a 409 on Save: in the alert.
    await detail.getByRole('button', { name: 'Edit', exact: true }).click()
    await detail.getByLabel('Email', { exact: true }).fill(other.email)
    await detail.getByRole('button', { name: 'Save', exact: true }).click()
    await detail
      .getByRole('alert')
      .getByText(taken.json<Problem>().title, { exact: true })
      .waitFor()
    const current = await s.call('GET', `/users/${ada.id}`)
    assert.equal(current.status, 200)
    const etag = current.headers.get('etag') ?? ''
    const broken = await s.call('PUT', `/users/${ada.id}`, {
      json: { email: 'broken', name: 'Ada, again', metadata: { team: 'engines', desk: '12' } },
      headers: { 'if-match': etag },
    })
    assert.equal(broken.status, 422)
    assert.equal(broken.json<Problem>().code, 'validation_failed')
    const emailMessage =
      broken.json<Problem>().errors?.find((entry) => entry.pointer === '/email')?.message ?? '?'
    await detail.getByLabel('Email', { exact: true }).fill('broken')
    await detail.getByRole('button', { name: 'Save', exact: true }).click()
    await page.locator('#edit-email[aria-invalid="true"]').waitFor()
    const editEmail = detail.getByLabel('Email', { exact: true })
    const editDescribedBy = (await editEmail.getAttribute('aria-describedby')) ?? ''
    assert.equal(await page.locator(`#${editDescribedBy}`).textContent(), emailMessage)
    assert.equal(await page.evaluate('document.activeElement.id'), 'edit-email')
    assert.equal(
      await detail.getByLabel('Name', { exact: true }).getAttribute('aria-invalid'),
      null,
    )

    // An entry that names no field of the form goes in the form's alert, with the problem's
    // title and detail; the one that names a field stays at its field. (The page never sends
    // a read-only field itself: the server's real answer to one that does is what it meets.)
    const readOnly = await s.call('PUT', `/users/${ada.id}`, {
      json: {
        email: 'broken',
        name: 'Ada, again',
        metadata: { team: 'engines', desk: '12' },
        status: 'active',
      },
      headers: { 'if-match': etag },
    })
    assert.equal(readOnly.status, 422)
    const readOnlyProblem = readOnly.json<Problem>()
    const statusEntry = readOnlyProblem.errors?.find((entry) => entry.pointer === '/status')
    assert.equal(statusEntry?.code, 'read_only')
    await page.route(`**/users/${ada.id}`, async (route) => {
      if (route.request().method() !== 'PUT') return route.continue()
      await route.fulfill({
        status: 422,
        contentType: 'application/problem+json',
        body: readOnly.text,
      })
    })
    await detail.getByRole('button', { name: 'Save', exact: true }).click()
    const editAlert = detail.getByRole('alert')
    await editAlert.getByText(readOnlyProblem.title, { exact: true }).waitFor()
    assert.equal(
      await editAlert.getByText(readOnlyProblem.detail, { exact: true }).textContent(),
      readOnlyProblem.detail,
    )
    assert.deepEqual(await editAlert.getByRole('listitem').allTextContents(), [
      `/status: ${statusEntry?.message}`,
    ])
    assert.equal(await page.locator(`#${editDescribedBy}`).textContent(), emailMessage)
    await page.unroute(`**/users/${ada.id}`)

    await detail.getByRole('button', { name: 'Cancel', exact: true }).click()
    assert.equal((await s.getUser(ada.id)).email, ada.email)
    assertClean(faults, [409, 412, 422])
  })

  it('asks before suspend, activate and delete (Cancel and Escape change nothing), and shows a 403 in the alert', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ name: 'Tim Berners-Lee' })
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    await signIn(page, makeToken({ scope: LIVE_SCOPES }))
    await page.getByRole('button', { name: user.email, exact: true }).click()
    const detail = page.getByRole('region', { name: 'User details' })
    await detail.getByText(user.id, { exact: true }).waitFor()
    const status = detail.locator('dd').nth(3)

    const confirm = async (action: string, choice: 'go' | 'cancel' | 'escape'): Promise<void> => {
      await detail.getByRole('button', { name: action, exact: true }).click()
      const dialog = page.getByRole('dialog', { name: `${action} ${user.email}?` })
      await dialog.waitFor()
      if (choice === 'go') await dialog.getByRole('button', { name: action, exact: true }).click()
      else if (choice === 'cancel')
        await dialog.getByRole('button', { name: 'Cancel', exact: true }).click()
      else await page.keyboard.press('Escape')
      await dialog.waitFor({ state: 'hidden' })
    }

    await confirm('Activate', 'cancel')
    await confirm('Activate', 'escape')
    assert.equal((await s.getUser(user.id)).status, 'pending')
    await detail.getByRole('button', { name: 'Activate', exact: true }).click()
    await assertAccessible(page, 'an open confirmation dialog')
    await screenshot(page, '7-confirm')
    await page.getByRole('dialog').getByRole('button', { name: 'Activate', exact: true }).click()
    await until(() => status.textContent(), 'active')
    assert.equal((await s.getUser(user.id)).status, 'active')

    await confirm('Suspend', 'escape')
    assert.equal((await s.getUser(user.id)).status, 'active')
    await confirm('Suspend', 'go')
    await until(() => status.textContent(), 'suspended')
    assert.equal(await status.textContent(), 'suspended')
    assert.equal((await s.getUser(user.id)).status, 'suspended')
    await page.getByRole('row').filter({ hasText: 'suspended' }).waitFor()

    await confirm('Delete', 'cancel')
    assert.equal((await s.getUser(user.id)).status, 'suspended')
    await confirm('Delete', 'go')
    await detail.waitFor({ state: 'hidden' })
    await page.getByRole('button', { name: user.email, exact: true }).waitFor({ state: 'detached' })
    assert.equal((await s.call('GET', `/users/${user.id}`)).status, 404)

    // A token that may read but not write: the 403's title and detail in the alert.
    const reader = makeToken({ scope: 'users:read' })
    const target = await s.createUser({ name: 'Read Only' })
    const forbidden = await s.call('POST', `/users/${target.id}:activate`, { token: reader })
    assert.equal(forbidden.status, 403)
    await page.getByRole('button', { name: 'Sign out', exact: true }).click()
    await signIn(page, reader)
    await page.getByRole('button', { name: target.email, exact: true }).click()
    await detail.getByText(target.id, { exact: true }).waitFor()
    await detail.getByRole('button', { name: 'Activate', exact: true }).click()
    await page.getByRole('dialog').getByRole('button', { name: 'Activate', exact: true }).click()
    const alert = detail.getByRole('alert')
    await alert.getByText(forbidden.json<Problem>().title, { exact: true }).waitFor()
    await alert.getByText(forbidden.json<Problem>().detail, { exact: true }).waitFor()
    assert.equal((await s.getUser(target.id)).status, 'pending')
    // The reader's 403s: the activate, and the feed (no events:read).
    assertClean(faults, [403])
  })

  it('follows the change feed live through fetch: new, changed and removed rows and an open detail within 2 s, a form being edited left alone', async (t) => {
    const s = await startService(t)
    const first = await s.createUser({ name: 'First' })
    const watched = await s.createUser({ name: 'Watched' })
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    await signIn(page, makeToken({ scope: LIVE_SCOPES }))
    const status = page.getByRole('status')
    await status.getByText('Live updates: on', { exact: true }).waitFor()

    const fresh = await s.createUser({ name: 'Fresh' })
    await page.getByRole('button', { name: fresh.email, exact: true }).waitFor({ timeout: 2000 })
    assert.equal((await shownEmails(page))[0], fresh.email)

    await page.getByRole('button', { name: watched.email, exact: true }).click()
    const detail = page.getByRole('region', { name: 'User details' })
    await detail.getByText(watched.id, { exact: true }).waitFor()
    assert.equal(
      (await s.call('PATCH', `/users/${watched.id}`, { json: { name: 'Renamed' } })).status,
      200,
    )
    await row(page, watched.email)
      .getByRole('cell', { name: 'Renamed', exact: true })
      .waitFor({ timeout: 2000 })
    await detail.getByText('Renamed', { exact: true }).waitFor({ timeout: 2000 })

    // A form being edited keeps what is typed; its Save meets the 412.
    await detail.getByRole('button', { name: 'Edit', exact: true }).click()
    await detail.getByLabel('Name', { exact: true }).fill('Mine')
    assert.equal(
      (await s.call('PATCH', `/users/${watched.id}`, { json: { name: 'Theirs' } })).status,
      200,
    )
    await row(page, watched.email)
      .getByRole('cell', { name: 'Theirs', exact: true })
      .waitFor({ timeout: 2000 })
    assert.equal(await detail.getByLabel('Name', { exact: true }).inputValue(), 'Mine')
    await detail.getByRole('button', { name: 'Save', exact: true }).click()
    await detail
      .getByRole('alert')
      .getByText(/changed meanwhile/)
      .waitFor()
    assert.equal((await s.getUser(watched.id)).name, 'Theirs')

    // The open detail's user deleted elsewhere: the detail says so and offers no action.
    await detail.getByRole('button', { name: 'Cancel', exact: true }).click()
    await detail.getByText('Theirs', { exact: true }).waitFor()
    assert.equal((await s.call('DELETE', `/users/${watched.id}`)).status, 204)
    assert.equal((await s.call('GET', `/users/${watched.id}`)).status, 404)
    await detail
      .getByRole('alert')
      .getByText('This user was deleted meanwhile.', { exact: true })
      .waitFor({ timeout: 2000 })
    assert.equal(await page.locator('#detail-actions').isHidden(), true)
    await page
      .getByRole('button', { name: watched.email, exact: true })
      .waitFor({ state: 'detached', timeout: 2000 })

    assert.equal((await s.call('DELETE', `/users/${first.id}`)).status, 204)
    await page
      .getByRole('button', { name: first.email, exact: true })
      .waitFor({ state: 'detached', timeout: 2000 })
    assertClean(faults, [412])

    // A token without events:read works, without live updates, and says so.
    await page.getByRole('button', { name: 'Sign out', exact: true }).click()
    await signIn(page, s.token)
    await status.getByText(/Live updates: off/).waitFor()
    await page.getByRole('button', { name: fresh.email, exact: true }).waitFor()
    assertClean(faults, [403, 412])
  })

  // A new user's event asks for a reload of the list a moment later: one still waiting at the
  // sign-out went out after it, without a token (a 401), and would have shown the old session's
  // list under the next. The page's clock is paused so that the reload waits past the sign-out.
  it('sends nothing after a sign-out that was asked for before it', async (t) => {
    const s = await startService(t)
    const { page, faults } = await openAdmin(t, `${s.url}/admin`)
    await page.clock.install()
    await signIn(page, makeToken({ scope: LIVE_SCOPES }))
    await page.getByRole('status').getByText('Live updates: on', { exact: true }).waitFor()
    await page.clock.pauseAt(Date.now() + 1000)
    const lists: string[] = []
    page.on('request', (request) => {
      if (new URL(request.url()).pathname.endsWith('/users')) lists.push(request.url())
    })
    await s.createUser({ name: 'Arrives' })
    // The event reaches the page on the real clock; its reload waits on the paused one.
    await new Promise((resolve) => setTimeout(resolve, 750))
    await page.getByRole('button', { name: 'Sign out', exact: true }).click()
    await page.clock.runFor(5000)
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.deepEqual(lists, [], 'no list asked for after the sign-out')
    assertClean(faults)
  })

  it('resumes live updates after its stream is cut, with Last-Event-ID set to the last event it saw, and shows what changed meanwhile', async (t) => {
    const s = await startService(t)
    const kept = await s.createUser({ name: 'Kept' })
    const proxy = await streamCutter(t, s.url)
    const { page, faults } = await openAdmin(t, `${proxy.url}/admin`)
    // The Last-Event-ID of each stream the page opened and the service answered.
    const resumedFrom: (string | undefined)[] = []
    page.on('response', async (response) => {
      const request = response.request()
      const url = new URL(request.url())
      const headers = await request.allHeaders()
      if (url.pathname !== '/events' || headers['accept'] !== 'text/event-stream') return
      resumedFrom.push(headers['last-event-id'])
    })
    // Playwright tells a response after the page may have shown its effect (and the listener
    // awaits the headers): wait for the count, up to 2 s, before checking it.
    const streamsSeen = async (count: number): Promise<(string | undefined)[]> => {
      for (let waited = 0; resumedFrom.length < count && waited < 2000; waited += 10)
        await new Promise((resolve) => setTimeout(resolve, 10))
      return resumedFrom
    }
    const token = makeToken({ scope: LIVE_SCOPES })
    await signIn(page, token)
    const status = page.getByRole('status')
    await status.getByText('Live updates: on', { exact: true }).waitFor()
    assert.equal((await streamsSeen(1)).length, 1)

    // A change seen live: its event is the last one the page saw.
    assert.equal(
      (await s.call('PATCH', `/users/${kept.id}`, { json: { name: 'Seen Live' } })).status,
      200,
    )
    await row(page, kept.email).getByRole('cell', { name: 'Seen Live', exact: true }).waitFor()
    const feed = await s.call('GET', '/events', { token })
    assert.equal(feed.status, 200)
    const seenId = feed.json<{ items: { id: string; type: string }[] }>().items.at(-1)
    assert.equal(seenId?.type, 'user.updated')

    // The page's stream cut, and its reconnections refused: changes made meanwhile reach it later.
    proxy.cut(true)
    await status
      .getByText('Live updates: interrupted, reconnecting…', { exact: true })
      .waitFor({ timeout: 5000 })
    assert.equal(
      (await s.call('PATCH', `/users/${kept.id}`, { json: { name: 'Changed While Cut' } })).status,
      200,
    )
    const fresh = await s.createUser({ name: 'Created While Cut' })
    await new Promise((resolve) => setTimeout(resolve, 1500))
    assert.equal(await row(page, kept.email).getByRole('cell', { name: 'Seen Live' }).count(), 1)
    assert.equal(await page.getByRole('button', { name: fresh.email, exact: true }).count(), 0)

    proxy.cut(false)
    await row(page, kept.email)
      .getByRole('cell', { name: 'Changed While Cut', exact: true })
      .waitFor({ timeout: 5000 })
    await page.getByRole('button', { name: fresh.email, exact: true }).waitFor({ timeout: 2000 })
    assert.equal((await shownEmails(page))[0], fresh.email)
    await status.getByText('Live updates: on', { exact: true }).waitFor()
    assert.equal((await streamsSeen(2)).length, 2)
    assert.equal(resumedFrom[1], seenId?.id)
    assert.deepEqual(faults.violations, [])
    // The only errors: the network's own notes of the requests the cut made fail.
    assert.deepEqual(
      faults.errors.filter((text) => !/net::ERR_/.test(text)),
      [],
    )
  })

  it('works under BASE_PATH: its files and its API calls resolve relative to /v1/admin', async (t) => {
    const s = await startService(t, { basePath: '/v1' })
    const user = await s.createUser({ email: 'based@example.com', name: 'Under A Base Path' })
    const { page, faults } = await openAdmin(t, `${s.url}/v1/admin`)
    const requested: string[] = []
    page.on('request', (request) => requested.push(new URL(request.url()).pathname))
    await signIn(page, makeToken({ scope: LIVE_SCOPES }))
    await page.getByRole('status').getByText('Live updates: on', { exact: true }).waitFor()
    await page.getByRole('button', { name: user.email, exact: true }).click()
    await page.getByRole('region', { name: 'User details' }).getByText(user.id).waitFor()
    assert.ok(requested.includes('/v1/users'), requested.join(' '))
    assert.ok(requested.includes('/v1/events'), requested.join(' '))
    assert.ok(requested.includes(`/v1/users/${user.id}`), requested.join(' '))
    assert.deepEqual(
      requested.filter((path) => !path.startsWith('/v1/')),
      [],
    )
    assertClean(faults)
  })
})
