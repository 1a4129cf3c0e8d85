import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import { openSse, type SseClient } from '../events/sse-client.js'
import { sleep } from '../helpers/child.js'
import { freshSchema, replicaStore, SKIP_POSTGRES } from '../helpers/postgres.js'
import { startService, type TestService } from '../helpers/service.js'
import { makeToken, nowSeconds } from '../helpers/tokens.js'

/** Where the writes are made, and the service that serves the stream. */
interface World {
  readonly writer: TestService
  readonly reader: TestService
}

// Heartbeats far apart: they must not be what ends these streams.
const QUIET = { eventStreams: { heartbeatMs: 60_000 } }

const WORLDS: readonly {
  name: string
  skip: string | false
  start(t: TestContext): Promise<World>
}[] = [
  {
    name: 'one service on the file store',
    skip: false,
    start: async (t) => {
      const service = await startService(t, QUIET)
      return { writer: service, reader: service }
    },
  },
  {
    name: 'two PostgreSQL replicas',
    skip: SKIP_POSTGRES,
    start: async (t) => {
      const schema = freshSchema(t)
      const writer = await startService(t, { store: replicaStore(t, schema) })
      const reader = await startService(t, { store: replicaStore(t, schema), ...QUIET })
      return { writer, reader }
    },
  },
]

/** Opens a stream of `query` with a token of `sub` issued before anything the test does. */
async function openStream(t: TestContext, world: World, sub: string, query: string) {
  const token = makeToken({ sub, scope: 'events:read', nowS: nowSeconds() - 1 })
  const stream = await openSse(`${world.reader.baseUrl}/events?${query}`, token)
  t.after(() => {
    stream.close()
  })
  assert.equal(stream.status, 200)
  return stream
}

/** Resolves when the stream ends within `ms` of `since`, cleanly, with a last comment `why`. */
async function assertEndsWithin(stream: SseClient, since: number, ms: number, why: RegExp) {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => {
        reject(new Error(`the stream still runs ${ms} ms later (${stream.events.length} events)`))
      },
      since + ms - Date.now(),
    )
  })
  try {
    await Promise.race([stream.ended, late])
  } finally {
    clearTimeout(timer)
  }
  assert.ok(Date.now() - since < ms)
  assert.ok(stream.response.complete, 'the stream ended with its last chunk, not a reset')
  assert.match(stream.comments.at(-1) ?? '', why)
}

function eventsOf(stream: SseClient): string[][] {
  return stream.events.map((event) => {
    const data = JSON.parse(event.data) as { type: string; userId: string }
    return [data.type, data.userId]
  })
}

for (const world of WORLDS) {
  describe(`a filtered SSE stream ends with its token's access, on ${world.name}`, {
    skip: world.skip,
  }, () => {
    it('type=: ends within 5 s of a revocation, and sends no event committed after it', async (t) => {
      const w = await world.start(t)
      const subject = await w.writer.createUser()
      const other = await w.writer.createUser()
      const stream = await openStream(t, w, subject.id, 'type=user.created')
      await stream.waitFor(2)
      const revoked = await w.writer.call('POST', `/users/${subject.id}:revokeTokens`)
      assert.equal(revoked.status, 200, revoked.text)
      const revokedAt = Date.now()
      await sleep(500)
      await w.writer.createUser()
      await assertEndsWithin(stream, revokedAt, 5000, /token was revoked/)
      assert.deepEqual(eventsOf(stream), [
        ['user.created', subject.id],
        ['user.created', other.id],
      ])
    })

    it("userId= of another user: ends within 5 s of a revocation, before that user's next change", async (t) => {
      const w = await world.start(t)
      const subject = await w.writer.createUser()
      const other = await w.writer.createUser()
      const stream = await openStream(t, w, subject.id, `userId=${other.id}`)
      await stream.waitFor(1)
      const revoked = await w.writer.call('POST', `/users/${subject.id}:revokeTokens`)
      assert.equal(revoked.status, 200, revoked.text)
      const revokedAt = Date.now()
      await sleep(500)
      const patched = await w.writer.call('PATCH', `/users/${other.id}`, {
        json: { name: 'Changed Later' },
      })
      assert.equal(patched.status, 200, patched.text)
      await assertEndsWithin(stream, revokedAt, 5000, /token was revoked/)
      assert.deepEqual(eventsOf(stream), [['user.created', other.id]])
    })

    it('ends within 5 s of a suspension of its subject though no event comes after it', async (t) => {
      const w = await world.start(t)
      const subject = await w.writer.createUser()
      assert.equal((await w.writer.call('POST', `/users/${subject.id}:activate`)).status, 200)
      const stream = await openStream(t, w, subject.id, 'type=user.deleted')
      const suspended = await w.writer.call('POST', `/users/${subject.id}:suspend`)
      assert.equal(suspended.status, 200, suspended.text)
      await assertEndsWithin(stream, Date.now(), 5000, /subject of the token is suspended/)
      assert.deepEqual(eventsOf(stream), [])
    })
  })
}
