import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import type { UserServiceOptions } from '../../src/process/create-user-service.js'
import { openSse, type SseClient } from '../events/sse-client.js'
import { sleep } from '../helpers/child.js'
import { assertProblem } from '../helpers/http.js'
import { freshSchema, replicaStore, SKIP_POSTGRES, sql } from '../helpers/postgres.js'
import { startService, type TestService } from '../helpers/service.js'
import { makeToken, nowSeconds } from '../helpers/tokens.js'
import { FEED_STORES } from './event-feed-fixtures.js'

const LEEWAY_S = 1

interface FeedEvent {
  type: string
  userId: string
}

async function start(
  t: TestContext,
  store: (typeof FEED_STORES)[number],
  options: Partial<UserServiceOptions> = {},
): Promise<TestService> {
  const made = store.make(t)
  return startService(t, {
    leewaySeconds: LEEWAY_S,
    // Heartbeats far apart: only the token's expiry or the subject's own event can end these streams.
    eventStreams: { heartbeatMs: 60_000 },
    ...(made === undefined ? {} : { store: made }),
    ...options,
  })
}

/** Resolves when the stream ends; fails after `ms`, with the stream still running. */
async function ended(stream: SseClient, ms: number, what: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      reject(
        new Error(`the stream still runs ${ms} ms after ${what} (${stream.events.length} events)`),
      )
    }, ms)
  })
  try {
    await Promise.race([stream.ended, late])
  } finally {
    clearTimeout(timer)
  }
}

function typesOf(stream: SseClient): string[][] {
  return stream.events.map((event) => {
    const data = JSON.parse(event.data) as FeedEvent
    return [data.type, data.userId]
  })
}

/** The stream ended with its last chunk (not a reset), a last comment saying why. */
function assertEndedCleanly(stream: SseClient, why: RegExp): void {
  assert.ok(stream.response.complete, 'the stream ended with its last chunk, not a reset')
  assert.match(stream.comments.at(-1) ?? '', why)
}

for (const store of FEED_STORES) {
  describe(`an SSE stream ends with its token's access (§6, §10), on ${store.name}`, {
    skip: store.skip,
  }, () => {
    it("ends at the token's expiry plus the leeway, and sends nothing after it", async (t) => {
      const svc = await start(t, store)
      const issuedS = nowSeconds()
      const token = makeToken({ sub: 'short-lived', scope: 'events:read', nowS: issuedS, ttl: 2 })
      const deadlineMs = (issuedS + 2 + LEEWAY_S) * 1000
      const stream = await openSse(`${svc.baseUrl}/events`, token)
      t.after(() => {
        stream.close()
      })
      assert.equal(stream.status, 200)
      const before = await svc.createUser()
      await stream.waitFor(1)
      await ended(stream, deadlineMs - Date.now() + 3000, 'the token expired')
      assert.ok(Date.now() >= deadlineMs, "not before the token's expiry plus the leeway")
      assertEndedCleanly(stream, /token has expired/)
      await svc.createUser()
      assert.deepEqual(typesOf(stream), [['user.created', before.id]])
      // A page request with the same token is refused as well.
      assertProblem(await svc.call('GET', '/events', { token }), 401, 'token_expired')
    })

    it('ends at once when its subject is suspended, without the suspension or any later event', async (t) => {
      const svc = await start(t, store)
      const subject = await svc.createUser()
      const token = makeToken({ sub: subject.id, scope: 'events:read' })
      const stream = await openSse(`${svc.baseUrl}/events`, token)
      t.after(() => {
        stream.close()
      })
      assert.equal(stream.status, 200)
      const other = await svc.createUser()
      // A change of the subject that keeps its access keeps the stream.
      assert.equal((await svc.call('POST', `/users/${subject.id}:activate`)).status, 200)
      await stream.waitFor(3)
      assert.equal((await svc.call('POST', `/users/${subject.id}:suspend`)).status, 200)
      await ended(stream, 3000, 'the subject was suspended')
      assertEndedCleanly(stream, /subject of the token is suspended/)
      await svc.createUser()
      assert.deepEqual(typesOf(stream), [
        ['user.created', subject.id],
        ['user.created', other.id],
        ['user.activated', subject.id],
      ])
      assertProblem(await svc.call('GET', '/events', { token }), 403, 'subject_suspended')
    })

    it('ends at once when its subject is deleted', async (t) => {
      const svc = await start(t, store)
      const subject = await svc.createUser()
      const token = makeToken({ sub: subject.id, scope: 'events:read' })
      const stream = await openSse(`${svc.baseUrl}/events`, token)
      t.after(() => {
        stream.close()
      })
      await stream.waitFor(1)
      assert.equal((await svc.call('DELETE', `/users/${subject.id}`)).status, 204)
      await ended(stream, 3000, 'the subject was deleted')
      assertEndedCleanly(stream, /subject of the token was deleted/)
      await svc.createUser()
      assert.deepEqual(typesOf(stream), [['user.created', subject.id]])
      assertProblem(await svc.call('GET', '/events', { token }), 403, 'subject_deleted')
    })

    // An import may create the stream's subject already suspended or revoked (its token then
    // refused on every request): its `user.created` ends the stream as the change itself would.
    it('ends at once when an import creates its subject suspended, or with its tokens revoked', async (t) => {
      const source = await startService(t)
      const suspended = await source.createUser()
      const revoked = await source.createUser()
      const tokens = [suspended, revoked].map((user) =>
        makeToken({ sub: user.id, scope: 'events:read', nowS: nowSeconds() - 5 }),
      )
      for (const action of ['activate', 'suspend']) {
        assert.equal((await source.call('POST', `/users/${suspended.id}:${action}`)).status, 200)
      }
      assert.equal((await source.call('POST', `/users/${revoked.id}:revokeTokens`)).status, 200)
      const exported = await fetch(`${source.baseUrl}/users:export`, {
        headers: { authorization: `Bearer ${source.token}` },
      })
      assert.equal(exported.status, 200)
      const lines = await exported.text()

      const svc = await start(t, store)
      const streams = await Promise.all(
        tokens.map((token) => openSse(`${svc.baseUrl}/events`, token)),
      )
      t.after(() => {
        for (const stream of streams) stream.close()
      })
      for (const stream of streams) assert.equal(stream.status, 200)
      const imported = await fetch(`${svc.baseUrl}/users:import`, {
        method: 'POST',
        headers: { authorization: `Bearer ${svc.token}`, 'content-type': 'application/x-ndjson' },
        body: lines,
      })
      const results = await imported.text()
      assert.equal(results.match(/"status":201/g)?.length, 2, results)
      const [ofSuspended, ofRevoked] = streams as [SseClient, SseClient]
      await ended(ofSuspended, 3000, 'an import created the subject suspended')
      assertEndedCleanly(ofSuspended, /subject of the token is suspended/)
      await ended(ofRevoked, 3000, 'an import created the subject with its tokens revoked')
      assertEndedCleanly(ofRevoked, /token was revoked/)
      await svc.createUser()
      // The other user's creation may come first; the subject's own and any later never.
      for (const [stream, subject] of [
        [ofSuspended, suspended],
        [ofRevoked, revoked],
      ] as const) {
        for (const [, userId] of typesOf(stream)) assert.notEqual(userId, subject.id)
        assert.ok(typesOf(stream).length <= 1)
      }
      assertProblem(
        await svc.call('GET', '/events', { token: tokens[0] }),
        403,
        'subject_suspended',
      )
      assertProblem(await svc.call('GET', '/events', { token: tokens[1] }), 401, 'token_revoked')
    })

    it('keeps running over a past suspension of a subject that is active again', async (t) => {
      const svc = await start(t, store)
      const subject = await svc.createUser()
      for (const action of ['activate', 'suspend', 'activate']) {
        assert.equal((await svc.call('POST', `/users/${subject.id}:${action}`)).status, 200)
      }
      const stream = await openSse(
        `${svc.baseUrl}/events`,
        makeToken({ sub: subject.id, scope: 'events:read' }),
      )
      t.after(() => {
        stream.close()
      })
      await stream.waitFor(4)
      const next = await svc.createUser()
      await stream.waitFor(5)
      assert.deepEqual(
        typesOf(stream).map(([type]) => type),
        ['user.created', 'user.activated', 'user.suspended', 'user.activated', 'user.created'],
      )
      assert.equal(typesOf(stream)[4]?.[1], next.id)
    })
  })
}

describe('an SSE stream on PostgreSQL notices at its heartbeat a suspension it saw no event of', {
  skip: SKIP_POSTGRES,
}, () => {
  it('ends within a heartbeat when another writer suspends the subject', async (t) => {
    const schema = freshSchema(t)
    const store = replicaStore(t, schema)
    const svc = await startService(t, { store, eventStreams: { heartbeatMs: 200 } })
    const subject = await svc.createUser()
    const stream = await openSse(
      `${svc.baseUrl}/events`,
      makeToken({ sub: subject.id, scope: 'events:read' }),
    )
    t.after(() => {
      stream.close()
    })
    await stream.waitFor(1)
    await sleep(300)
    assert.equal(stream.response.complete, false, 'the stream runs while its subject may read')
    // Behind the service's back: no event tells the stream, only its periodic check can.
    await sql(`UPDATE ${schema}.users SET status = 'suspended' WHERE id = $1`, [subject.id])
    await ended(stream, 3000, 'the subject was suspended')
    assertEndedCleanly(stream, /subject of the token is suspended/)
  })
})
