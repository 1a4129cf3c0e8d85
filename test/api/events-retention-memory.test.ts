import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { ChangeEvent } from '../../src/domain/event.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { assertProblem } from '../helpers/http.js'
import { startService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

// The memory store keeps its feed in memory: it prunes it by the retention as the file store and
// PostgreSQL prune theirs, or a long-running embedded service would hold every event it ever made.

const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })
const DAY_MS = 86_400_000

interface FeedPage {
  items: ChangeEvent[]
  nextCursor: string
}

describe('the memory store prunes its feed', () => {
  it('drops events past eventsRetentionDays: older cursors are 410, later ones go on', async (t) => {
    let clock = Date.now()
    const store = new MemoryStore([], { now: () => clock, eventsRetentionDays: 30 })
    const svc = await startService(t, { store })
    const old = await svc.createUser()
    const first = (await svc.call('GET', '/events', { token: reader })).json<FeedPage>()
    assert.deepEqual(
      first.items.map((event) => event.userId),
      [old.id],
    )
    clock += 31 * DAY_MS
    const fresh = await svc.createUser()
    await store.pruneEvents()
    const expired = await svc.call('GET', `/events?after=${'0'.repeat(16)}`, { token: reader })
    assertProblem(expired, 410, 'cursor_expired')
    const retained = (await svc.call('GET', '/events', { token: reader })).json<FeedPage>()
    assert.deepEqual(
      retained.items.map((event) => event.userId),
      [fresh.id],
    )
    // The cursor of the last pruned event is still good: nothing after it was missed.
    const after = await svc.call('GET', `/events?after=${first.nextCursor}`, { token: reader })
    assert.equal(after.status, 200, after.text)
    assert.deepEqual(
      after.json<FeedPage>().items.map((event) => event.userId),
      [fresh.id],
    )
  })

  it('keeps 30 days by default, and prunes nothing younger', async (t) => {
    let clock = Date.now()
    const store = new MemoryStore([], { now: () => clock })
    const svc = await startService(t, { store })
    const kept = await svc.createUser()
    clock += 29 * DAY_MS
    await store.pruneEvents()
    const page = (
      await svc.call('GET', `/events?after=${'0'.repeat(16)}`, { token: reader })
    ).json<FeedPage>()
    assert.deepEqual(
      page.items.map((event) => event.userId),
      [kept.id],
    )
    clock += 2 * DAY_MS
    await store.pruneEvents()
    const gone = await svc.call('GET', `/events?after=${'0'.repeat(16)}`, { token: reader })
    assertProblem(gone, 410, 'cursor_expired')
  })
})
