import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import type { TestResponse } from '../helpers/http.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { STORES } from '../helpers/store-cases.js'
import { makeToken } from '../helpers/tokens.js'

/**
 * A user's metadata keeps the order its keys were sent in, keys that look like array indices
 * ("9", "1") included, which every JS object puts first: in answers, events, the export, after a
 * restart, and through a merge patch. The order is part of the value: a reorder is a change.
 */

const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })

/** An NDJSON exchange (export, import), its answer as text. */
async function ndjson(
  app: TestService,
  method: string,
  target: string,
  body?: string,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${app.baseUrl}${target}`, {
    method,
    headers: { authorization: `Bearer ${app.token}`, 'content-type': 'application/x-ndjson' },
    ...(body === undefined ? {} : { body }),
  })
  return { status: res.status, text: await res.text() }
}

const SENT = '{"b":"1","a":"2","9":"x","1":"y"}'
const MERGE_PATCH = 'application/merge-patch+json'

/** A request with a JSON body sent as this exact text (JSON.stringify would reorder it). */
function send(
  app: TestService,
  method: string,
  target: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<TestResponse> {
  const contentType = method === 'PATCH' ? MERGE_PATCH : 'application/json'
  return app.call(method, target, { body, contentType, headers })
}

/** The metadata of a user's JSON text, as the text writes it. */
function metadataText(json: string): string {
  const match = /"metadata":(\{[^}]*\})/.exec(json)
  assert.ok(match !== null, `no metadata in ${json}`)
  return match[1] ?? ''
}

async function createOrdered(app: TestService): Promise<{ user: User; text: string }> {
  const body = `{"email":"${uniqueEmail('order')}","name":"O","metadata":${SENT}}`
  const res = await send(app, 'POST', '/users', body)
  assert.equal(res.status, 201, res.text)
  return { user: res.json<User>(), text: res.text }
}

interface FeedEvent {
  type: string
  userId: string
  version: number
  changed?: string[]
}

/** The feed's events of one user, each with its text as the feed wrote it. */
async function userEvents(
  app: TestService,
  id: string,
): Promise<{ event: FeedEvent; text: string }[]> {
  const res = await app.call('GET', `/events?userId=${id}`, { token: reader })
  assert.equal(res.status, 200, res.text)
  const page = res.json<{ items: FeedEvent[] }>()
  // The page's items in its own text, one per event: each holds one user object.
  const texts = res.text.split('"user":').slice(1)
  assert.equal(texts.length, page.items.length, res.text)
  return page.items.map((event, i) => ({ event, text: texts[i] ?? '' }))
}

for (const on of STORES) {
  const start = (t: TestContext): Promise<TestService> => startService(t, on.make(t))
  describe(`metadata key order (${on.name} store)`, { skip: on.skip }, () => {
    it('answers POST and GET with the keys in the order sent, index-like keys included', async (t) => {
      const app = await start(t)
      const { user, text } = await createOrdered(app)
      assert.equal(metadataText(text), SENT)
      const got = await app.call('GET', `/users/${user.id}`)
      assert.equal(got.status, 200, got.text)
      assert.equal(metadataText(got.text), SENT)
      const listed = await app.call('GET', `/users?ids=${user.id}`)
      assert.equal(listed.status, 200, listed.text)
      assert.equal(metadataText(listed.text), SENT)
    })

    it('takes a PUT that only reorders the keys as a change (a new version, a user.updated event naming metadata), and one in the same order as none', async (t) => {
      const app = await start(t)
      const { user } = await createOrdered(app)
      const same = `{"email":${JSON.stringify(user.email)},"name":"O","metadata":${SENT}}`
      const unchanged = await send(app, 'PUT', `/users/${user.id}`, same)
      assert.equal(unchanged.status, 200, unchanged.text)
      assert.equal(unchanged.json<User>().version, 1)
      const reordered = '{"1":"y","9":"x","a":"2","b":"1"}'
      const body = `{"email":${JSON.stringify(user.email)},"name":"O","metadata":${reordered}}`
      const res = await send(app, 'PUT', `/users/${user.id}`, body)
      assert.equal(res.status, 200, res.text)
      assert.equal(res.json<User>().version, 2)
      assert.equal(res.headers.get('etag'), '"v2"')
      assert.equal(metadataText(res.text), reordered)
      assert.equal(metadataText((await app.call('GET', `/users/${user.id}`)).text), reordered)
      const events = await userEvents(app, user.id)
      assert.deepEqual(
        events.map(({ event }) => [event.type, event.version, event.changed]),
        [
          ['user.created', 1, undefined],
          ['user.updated', 2, ['metadata']],
        ],
      )
      assert.equal(metadataText(events[0]?.text ?? ''), SENT)
      assert.equal(metadataText(events[1]?.text ?? ''), reordered)
    })

    it('merges a PATCH in place: kept keys stay, removed keys leave, new keys follow in the order sent', async (t) => {
      const app = await start(t)
      const { user } = await createOrdered(app)
      const patch = '{"metadata":{"c":"new","a":null,"0":"zero","9":"changed"}}'
      const res = await send(app, 'PATCH', `/users/${user.id}`, patch)
      assert.equal(res.status, 200, res.text)
      const merged = '{"b":"1","9":"changed","1":"y","c":"new","0":"zero"}'
      assert.equal(metadataText(res.text), merged)
      assert.equal(res.json<User>().version, 2)
      assert.equal(metadataText((await app.call('GET', `/users/${user.id}`)).text), merged)
      const events = await userEvents(app, user.id)
      assert.deepEqual(events[1]?.event.changed, ['metadata'])
      assert.equal(metadataText(events[1]?.text ?? ''), merged)
    })

    it('exports the keys in order, and an import elsewhere keeps them; the same line again is 200, reordered it is 409 duplicate_id', async (t) => {
      const app = await start(t)
      const { user } = await createOrdered(app)
      const exported = await ndjson(app, 'GET', '/users:export')
      assert.equal(exported.status, 200, exported.text)
      const line = exported.text.split('\n').find((text) => text.includes(user.id)) ?? ''
      assert.equal(metadataText(line), SENT)
      const other = await startService(t, { store: new MemoryStore() })
      const imported = await ndjson(other, 'POST', '/users:import', `${line}\n`)
      assert.equal(imported.status, 200, imported.text)
      assert.equal(JSON.parse(imported.text).status, 201, imported.text)
      const got = await other.call('GET', `/users/${user.id}`)
      assert.equal(got.text, line)
      const again = await ndjson(other, 'POST', '/users:import', `${line}\n`)
      assert.equal(JSON.parse(again.text).status, 200, again.text)
      const reordered = line.replace(SENT, '{"1":"y","9":"x","b":"1","a":"2"}')
      const clash = await ndjson(other, 'POST', '/users:import', `${reordered}\n`)
      const result = JSON.parse(clash.text) as { status: number; code: string }
      assert.deepEqual([result.status, result.code], [409, 'duplicate_id'], clash.text)
      assert.equal((await other.call('GET', `/users/${user.id}`)).text, line)
    })
  })
}

describe('metadata key order across a restart (file store)', () => {
  it('answers GET in the order sent after a restart, and a PATCH then adds at the end', async (t) => {
    const first = await startService(t)
    const { user } = await createOrdered(first)
    await first.service.close()
    const second = await startService(t, { dataDir: first.dataDir })
    const got = await second.call('GET', `/users/${user.id}`)
    assert.equal(got.status, 200, got.text)
    assert.equal(metadataText(got.text), SENT)
    const res = await send(second, 'PATCH', `/users/${user.id}`, '{"metadata":{"0":"z"}}')
    assert.equal(res.status, 200, res.text)
    assert.equal(metadataText(res.text), '{"b":"1","a":"2","9":"x","1":"y","0":"z"}')
    const events = await userEvents(second, user.id)
    assert.equal(metadataText(events[0]?.text ?? ''), SENT)
  })
})
