import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { openSse } from '../events/sse-client.js'
import { assertProblem } from '../helpers/http.js'
import { startService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { FEED_STORES } from './event-feed-fixtures.js'

const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })
const stream = { accept: 'text/event-stream' }

interface FeedPage {
  items: { id: string; userId: string }[]
  nextCursor: string
}

for (const store of FEED_STORES) {
  describe(`event cursors at the edge of what a store holds exactly (§10), on ${store.name}`, {
    skip: store.skip,
  }, () => {
    it('answers 400 naming after or Last-Event-ID for a cursor past 7fffffffffffffff, never 503, and the feed is unchanged', async (t) => {
      const made = store.make(t)
      const svc = await startService(t, {
        ...(made === undefined ? {} : { store: made }),
        eventStreams: { heartbeatMs: 100 },
      })
      await svc.createUser()
      await svc.createUser()
      const before = await svc.call('GET', '/events', { token: reader })
      assert.equal(before.status, 200, before.text)
      for (const cursor of ['8000000000000000', 'ffffffffffffffff', '8000000000000001']) {
        const page = await svc.call('GET', `/events?after=${cursor}`, { token: reader })
        const problem = assertProblem(page, 400, 'bad_request')
        assert.equal(
          problem.detail,
          'The query parameter after cannot be represented exactly: cursors go up to 7fffffffffffffff.',
        )
        const live = await svc.call('GET', '/events', {
          token: reader,
          headers: { ...stream, 'last-event-id': cursor },
        })
        const header = assertProblem(live, 400, 'bad_request')
        assert.equal(
          header.detail,
          'The header Last-Event-ID cannot be represented exactly: cursors go up to 7fffffffffffffff.',
        )
      }
      // The client's input never reached the store: readiness never dipped.
      assert.equal((await svc.call('GET', '/readyz')).status, 200)
      const after = await svc.call('GET', '/events', { token: reader })
      assert.equal(after.text, before.text)
    })

    it('gives an empty page at 7fffffffffffffff, and a stream there that waits', async (t) => {
      const made = store.make(t)
      const svc = await startService(t, {
        ...(made === undefined ? {} : { store: made }),
        eventStreams: { heartbeatMs: 100 },
      })
      await svc.createUser()
      const page = await svc.call('GET', '/events?after=7fffffffffffffff', { token: reader })
      assert.equal(page.status, 200, page.text)
      assert.deepEqual(page.json<FeedPage>(), { items: [], nextCursor: '7fffffffffffffff' })
      const live = await openSse(`${svc.baseUrl}/events`, reader, {
        'last-event-id': '7fffffffffffffff',
      })
      t.after(() => {
        live.close()
      })
      assert.equal(live.status, 200)
      await svc.createUser()
      // Heartbeats after the write: the stream is alive and has had time to send the event, had it been due.
      await live.waitForComments(live.comments.length + 3, 5000)
      assert.deepEqual(live.events, [])
      assert.equal((await svc.call('GET', '/readyz')).status, 200)
    })

    it('names the header, not a query parameter, when Last-Event-ID is malformed', async (t) => {
      const made = store.make(t)
      const svc = await startService(t, made === undefined ? {} : { store: made })
      const user = await svc.createUser()
      for (const value of ['nope', '7FFFFFFFFFFFFFFF', '0123', '00000000000000001']) {
        const res = await svc.call('GET', '/events', {
          token: reader,
          headers: { ...stream, 'last-event-id': value },
        })
        const problem = assertProblem(res, 400, 'bad_request')
        assert.equal(
          problem.detail,
          'The header Last-Event-ID must be a cursor or an event id from this feed (16 lower-case hex digits).',
        )
      }
      const bad = await svc.call('GET', '/events?after=nope', { token: reader })
      assert.equal(
        assertProblem(bad, 400, 'bad_request').detail,
        'The query parameter after must be a cursor or an event id from this feed (16 lower-case hex digits).',
      )
      const page = await svc.call('GET', '/events', { token: reader })
      assert.deepEqual(
        page.json<FeedPage>().items.map((event) => event.userId),
        [user.id],
      )
    })
  })
}
