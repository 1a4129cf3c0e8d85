import assert from 'node:assert/strict'
import { createHash, randomUUID } from 'node:crypto'
import { describe, it } from 'node:test'

import type { KeptAnswer, KeptKey, KeyToKeep } from '../../src/domain/kept-key.js'
import type { UserRecord } from '../../src/domain/user.js'
import type { Store } from '../../src/store/store.js'
import type { StoreFactory } from './store-suite.js'
import { changeUser, makeUser } from './store-users.js'

type Opener = (t: Parameters<StoreFactory>[0], factory: StoreFactory) => Promise<Store>

const HOUR = 3_600_000

/** The answer an HTTP handler would keep for a change that made `record` (none: a deletion). */
export function answerOf(record: UserRecord | undefined): KeptAnswer {
  if (record === undefined) return { status: 204 }
  return {
    status: record.user.version === 1 ? 201 : 200,
    body: record.json,
    contentType: 'application/json',
    etag: record.etag,
    headers: { location: `/users/${record.user.id}` },
  }
}

/** A fingerprint as the HTTP side makes it: the SHA-256 of what the request sent, as hex. */
export function fingerprintOf(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

/** A key to hand down with a change: records every `keep` call, and what it returned. */
export function keyToKeep(
  subject: string,
  key: string,
  options: { fingerprint?: string; expiresAt?: number } = {},
): KeyToKeep & { readonly calls: (UserRecord | undefined)[]; readonly kept: KeptKey[] } {
  const calls: (UserRecord | undefined)[] = []
  const kept: KeptKey[] = []
  return {
    calls,
    kept,
    keep(record) {
      calls.push(record)
      const made: KeptKey = {
        subject,
        key,
        fingerprint: options.fingerprint ?? fingerprintOf(`${subject} ${key}`),
        answer: answerOf(record),
        expiresAt: options.expiresAt ?? Date.now() + HOUR,
      }
      kept.push(made)
      return made
    },
  }
}

/** The one key `keep` made (it must have been called once). */
export function keptOnce(idempotency: { readonly kept: readonly KeptKey[] }): KeptKey {
  assert.equal(idempotency.kept.length, 1, 'keep was called once')
  const [kept] = idempotency.kept
  assert.ok(kept !== undefined)
  return kept
}

/** A kept key with no change (an unchanged repeat), for keepAlone. */
export function aloneKey(subject: string, key: string, expiresAt = Date.now() + HOUR): KeptKey {
  return {
    subject,
    key,
    fingerprint: fingerprintOf(`alone ${subject} ${key}`),
    answer: {
      status: 200,
      body: '{"unchanged": true,\n "é": "\\u00e9"}',
      contentType: 'application/json; charset=utf-8',
      etag: '"v3"',
    },
    expiresAt,
  }
}

/** How many events the feed holds past `after` (a cursor), following every page. */
async function eventsAfter(store: Store, after: string | undefined): Promise<string[]> {
  const types: string[] = []
  let cursor = after
  for (;;) {
    const page = await store.events.read({
      limit: 100,
      ...(cursor === undefined ? {} : { after: cursor }),
    })
    types.push(...page.items.map((event) => `${event.type} ${event.userId}`))
    if (page.items.length === 0) return types
    cursor = page.nextCursor
  }
}

async function feedEnd(store: Store): Promise<string | undefined> {
  let cursor: string | undefined
  for (;;) {
    const page = await store.events.read({
      limit: 100,
      ...(cursor === undefined ? {} : { after: cursor }),
    })
    if (page.items.length === 0) return page.nextCursor ?? cursor
    cursor = page.nextCursor
  }
}

/**
 * The kept `Idempotency-Key`s every store keeps alike (docs/api.md, safe retries): a key handed
 * down with a change is kept exactly when the change is, with the answer its `keep` made; a key
 * kept alone is found; keys are per subject; expired keys are unknown. Registered by
 * describeStoreContract.
 */
export function describeKeyContract(label: string, factory: StoreFactory, openStore: Opener): void {
  describe(`${label}: kept idempotency keys`, () => {
    it('keeps the key of a create with its change: found with the answer keep made, one event', async (t) => {
      const store = await openStore(t, factory)
      const start = await feedEnd(store)
      const subject = `admin-${randomUUID()}`
      const key = randomUUID()
      const idempotency = keyToKeep(subject, key)
      assert.equal(await store.keys.find(subject, key), undefined, 'unknown before')
      const record = await store.create(makeUser(), undefined, { actor: subject, idempotency })
      assert.deepEqual(idempotency.calls, [record], 'keep is called once, with the record made')
      assert.deepEqual(await store.keys.find(subject, key), keptOnce(idempotency))
      assert.deepEqual(await eventsAfter(store, start), [`user.created ${record.user.id}`])
    })

    it('keeps the keys of an update and of a delete (keep called with no record)', async (t) => {
      const store = await openStore(t, factory)
      const subject = `admin-${randomUUID()}`
      const made = await store.create(makeUser())
      const updating = keyToKeep(subject, 'update-1')
      const updated = await store.update(
        made.user.id,
        (current) => changeUser(current.user, { name: 'Kept Update' }),
        { idempotency: updating },
      )
      const deleting = keyToKeep(subject, 'delete-1')
      await store.delete(made.user.id, undefined, { idempotency: deleting })
      assert.deepEqual(updating.calls, [updated])
      assert.deepEqual(deleting.calls, [undefined])
      assert.deepEqual(await store.keys.find(subject, 'update-1'), keptOnce(updating))
      assert.deepEqual(await store.keys.find(subject, 'delete-1'), keptOnce(deleting))
      assert.equal((await store.keys.find(subject, 'delete-1'))?.answer.status, 204)
    })

    it('keeps a key per subject: the same key of another subject is unknown', async (t) => {
      const store = await openStore(t, factory)
      const key = randomUUID()
      const idempotency = keyToKeep('subject-a', key)
      await store.create(makeUser(), undefined, { idempotency })
      assert.deepEqual(await store.keys.find('subject-a', key), keptOnce(idempotency))
      assert.equal(await store.keys.find('subject-b', key), undefined)
      assert.equal(await store.keys.find('subject-a', `${key}x`), undefined)
    })

    it('keeps no key for a change that changed nothing (keep not called) nor for a refused one', async (t) => {
      const store = await openStore(t, factory)
      const subject = `admin-${randomUUID()}`
      const made = await store.create(makeUser({ email: `taken-${randomUUID()}@example.com` }))
      const unchanged = keyToKeep(subject, 'same')
      const same = await store.update(made.user.id, () => undefined, { idempotency: unchanged })
      assert.deepEqual(same, made)
      assert.deepEqual(unchanged.calls, [], 'a change without an event keeps no key itself')
      assert.equal(await store.keys.find(subject, 'same'), undefined)
      const refused = keyToKeep(subject, 'refused')
      await assert.rejects(
        store.create(makeUser({ email: made.user.email }), undefined, { idempotency: refused }),
        { name: 'ServiceError', code: 'duplicate_email' },
      )
      const missing = keyToKeep(subject, 'missing')
      await assert.rejects(store.delete(makeUser().id, undefined, { idempotency: missing }), {
        name: 'ServiceError',
        code: 'not_found',
      })
      assert.equal(await store.keys.find(subject, 'refused'), undefined)
      assert.equal(await store.keys.find(subject, 'missing'), undefined)
    })

    it('keeps a key alone (a success without a change), its answer byte for byte', async (t) => {
      const store = await openStore(t, factory)
      const subject = `admin-${randomUUID()}`
      // Every printable ASCII character a String may hold, quotes and backslashes included.
      const key = `${Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('')}"\\`
      const kept = aloneKey(subject, key)
      await store.keys.keepAlone(kept)
      assert.deepEqual(await store.keys.find(subject, key), kept)
      const long = 'k'.repeat(255)
      const other = aloneKey(subject, long)
      await store.keys.keepAlone(other)
      assert.deepEqual(await store.keys.find(subject, long), other)
      assert.deepEqual(await store.keys.find(subject, key), kept)
    })

    it('does not find a key once it has expired', async (t) => {
      const store = await openStore(t, factory)
      const subject = `admin-${randomUUID()}`
      await store.keys.keepAlone(aloneKey(subject, 'gone', Date.now() - 1))
      assert.equal(await store.keys.find(subject, 'gone'), undefined)
      // Two seconds: a durable create on a loaded disk must not outlast the key it keeps.
      const expiresAt = Date.now() + 2000
      const idempotency = keyToKeep(subject, 'short', { expiresAt })
      await store.create(makeUser(), undefined, { idempotency })
      assert.deepEqual(await store.keys.find(subject, 'short'), keptOnce(idempotency))
      await new Promise((resolve) => setTimeout(resolve, expiresAt + 20 - Date.now()))
      assert.equal(await store.keys.find(subject, 'short'), undefined)
    })

    it('holds a fresh key for this process, and takes it back', async (t) => {
      const store = await openStore(t, factory)
      const subject = `admin-${randomUUID()}`
      assert.equal(await store.keys.hold(subject, 'fresh'), 'held')
      await store.keys.release(subject, 'fresh')
      assert.equal(await store.keys.find(subject, 'fresh'), undefined, 'a hold keeps nothing')
      assert.equal(await store.keys.hold(subject, 'fresh'), 'held', 'free again')
      await store.keys.release(subject, 'fresh')
    })
  })
}
