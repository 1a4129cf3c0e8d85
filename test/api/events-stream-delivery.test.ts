import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { openSse, type SseClient } from '../events/sse-client.js'
import { startService, type TestService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { FEED_STORES, largeMetadata, writeLargeFeed } from './event-feed-fixtures.js'

const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })

interface FeedEvent {
  id: string
  type: string
  userId: string
  version: number
}

/** Every event of the feed, walked page by page with the same filter. */
async function walkFeed(svc: TestService, filter: string): Promise<FeedEvent[]> {
  const events: FeedEvent[] = []
  let cursor: string | undefined
  for (;;) {
    const query = [filter, cursor === undefined ? '' : `after=${cursor}`]
      .filter((part) => part !== '')
      .join('&')
    const res = await svc.call('GET', `/events?${query}`, { token: reader })
    assert.equal(res.status, 200, res.text)
    const page = res.json<{ items: FeedEvent[]; nextCursor: string }>()
    events.push(...page.items)
    if (page.nextCursor === cursor) return events
    cursor = page.nextCursor
  }
}

function assertExactlyOnceInOrder(stream: SseClient, expected: readonly FeedEvent[]): void {
  const got = stream.events.map((event) => JSON.parse(event.data) as FeedEvent)
  assert.deepEqual(
    got.map((event) => event.id),
    expected.map((event) => event.id),
  )
  assert.deepEqual(
    stream.events.map((event) => event.id),
    expected.map((event) => event.id),
    "each frame's id is its event's",
  )
  assert.equal(new Set(got.map((event) => event.id)).size, got.length, 'no event twice')
}

for (const store of FEED_STORES) {
  describe(`a reading SSE consumer of large events, on ${store.name}`, { skip: store.skip }, () => {
    it('gets every event exactly once and in order, backlog and live, through pages bounded in bytes', async (t) => {
      const made = store.make(t)
      // A bound of two events of this feed: every page is cut short by bytes, and the socket drains often.
      const svc = await startService(t, {
        ...(made === undefined ? {} : { store: made }),
        eventStreams: { maxBufferBytes: 64 * 1024 },
      })
      const userId = await writeLargeFeed(svc.baseUrl, svc.token, 40)
      const all = await openSse(`${svc.baseUrl}/events`, reader)
      const updates = await openSse(
        `${svc.baseUrl}/events?type=user.updated&userId=${userId}`,
        reader,
      )
      t.after(() => {
        all.close()
        updates.close()
      })
      // Live writes while the backlog is still being sent: large updates and small creates between them.
      for (let i = 0; i < 10; i += 1) {
        await svc.createUser({ metadata: i % 2 === 0 ? largeMetadata(`live${i}`) : {} })
        const patched = await svc.call('PATCH', `/users/${userId}`, {
          json: { name: `Large ${i}` },
          contentType: 'application/merge-patch+json',
        })
        assert.equal(patched.status, 200, patched.text)
      }
      const expected = await walkFeed(svc, '')
      assert.equal(expected.length, 61)
      await all.waitFor(expected.length)
      assertExactlyOnceInOrder(all, expected)
      const expectedUpdates = await walkFeed(svc, `type=user.updated&userId=${userId}`)
      assert.equal(expectedUpdates.length, 50)
      await updates.waitFor(expectedUpdates.length)
      assertExactlyOnceInOrder(updates, expectedUpdates)
      assert.deepEqual(
        expectedUpdates.map((event) => event.version),
        Array.from({ length: 50 }, (_, i) => i + 2),
      )
    })
  })
}
