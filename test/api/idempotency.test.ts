import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import type { UserServiceOptions } from '../../src/process/create-user-service.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { assertProblem, type TestResponse } from '../helpers/http.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { STORES } from '../helpers/store-cases.js'
import { makeToken } from '../helpers/tokens.js'
import { assertUnchangedBy } from '../helpers/users-suite.js'

const KEY = '"8e03978e-40d5-43e8-bc93-6894a57f9324"'

function keyed(key: string, headers: Record<string, string> = {}): Record<string, string> {
  return { 'idempotency-key': key, ...headers }
}

async function eventsOf(s: TestService, userId?: string): Promise<{ type: string }[]> {
  const res = await s.call('GET', '/events?limit=1000', {
    token: makeToken({ scope: 'events:read' }),
  })
  assert.equal(res.status, 200, res.text)
  const items = res.json<{ items: { type: string; userId: string }[] }>().items
  return userId === undefined ? items : items.filter((event) => event.userId === userId)
}

function assertReplayOf(replay: TestResponse, first: TestResponse): void {
  assert.equal(replay.status, first.status, replay.text)
  assert.equal(replay.text, first.text)
  assert.equal(replay.headers.get('idempotent-replayed'), 'true')
  assert.equal(replay.headers.get('cache-control'), 'no-store')
  for (const name of ['content-type', 'location', 'etag']) {
    assert.equal(replay.headers.get(name), first.headers.get(name), name)
  }
  assert.notEqual(replay.headers.get('x-request-id'), first.headers.get('x-request-id'))
}

/** A request whose head is sent now and whose body is held back until `finish` is called. */
async function heldRequest(
  s: TestService,
  method: string,
  target: string,
  key: string,
  body: string,
): Promise<{ finish: () => Promise<string> }> {
  const url = new URL(`${s.baseUrl}${target}`)
  const socket: Socket = connect(Number(url.port), url.hostname)
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
  const bytes = Buffer.from(body)
  socket.write(
    [
      `${method} ${url.pathname} HTTP/1.1`,
      `host: ${url.host}`,
      `authorization: Bearer ${s.token}`,
      'content-type: application/json',
      `content-length: ${bytes.length}`,
      `idempotency-key: ${key}`,
      '',
      '',
    ].join('\r\n'),
  )
  socket.write(bytes.subarray(0, 1))
  let received = ''
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1')
  })
  // Long enough for the server to have read the head and held the key (on PostgreSQL, an
  // INSERT), with margin for a loaded machine.
  await new Promise((resolve) => setTimeout(resolve, 300))
  return {
    finish: async () => {
      socket.write(bytes.subarray(1))
      const deadline = Date.now() + 5000
      while (!/\r\n\r\n[\s\S]*\}$/.test(received) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      socket.destroy()
      return received
    },
  }
}

for (const store of STORES) {
  describe(`Idempotency-Key on the ${store.name} store`, { skip: store.skip }, () => {
    const start = (t: TestContext, options: Partial<UserServiceOptions> = {}) =>
      startService(t, { ...store.make(t), ...options })

    it('a retried POST /users gets the first answer, replayed: one user, one event', async (t) => {
      const s = await start(t)
      const json = { email: uniqueEmail(), name: 'Once' }
      const first = await s.call('POST', '/users', { json, headers: keyed(KEY) })
      assert.equal(first.status, 201, first.text)
      assert.equal(first.headers.get('idempotent-replayed'), null)
      const user = first.json<User>()
      const replay = await s.call('POST', '/users', { json, headers: keyed(KEY) })
      assertReplayOf(replay, first)
      assert.equal(replay.headers.get('location'), `/users/${user.id}`)
      assert.equal((await s.snapshot()).length, 1)
      assert.deepEqual(
        (await eventsOf(s)).map((event) => event.type),
        ['user.created'],
      )
    })

    it('replays the answer as it was, after the user changed and after it was deleted', async (t) => {
      const s = await start(t)
      const json = { email: uniqueEmail(), name: 'Before' }
      const first = await s.call('POST', '/users', { json, headers: keyed(KEY) })
      const user = first.json<User>()
      const patched = await s.call('PATCH', `/users/${user.id}`, { json: { name: 'After' } })
      assert.equal(patched.status, 200, patched.text)
      assertReplayOf(await s.call('POST', '/users', { json, headers: keyed(KEY) }), first)
      assert.equal((await s.call('DELETE', `/users/${user.id}`)).status, 204)
      assertReplayOf(await s.call('POST', '/users', { json, headers: keyed(KEY) }), first)
      assert.deepEqual(
        (await eventsOf(s, user.id)).map((event) => event.type),
        ['user.created', 'user.updated', 'user.deleted'],
      )
    })

    it('a fresh token, another If-Match and another Content-Type are the same request', async (t) => {
      const s = await start(t)
      const user = await s.createUser()
      const body = JSON.stringify({ name: 'Renamed' })
      const first = await s.call('PATCH', `/users/${user.id}`, {
        body,
        contentType: 'application/merge-patch+json',
        headers: keyed(KEY, { 'if-match': `"v${user.version}"` }),
      })
      assert.equal(first.status, 200, first.text)
      const replay = await s.call('PATCH', `/users/${user.id}`, {
        body,
        contentType: 'application/json',
        token: makeToken(),
        headers: keyed(KEY, { 'if-match': '"v999"' }),
      })
      assertReplayOf(replay, first)
      assert.equal((await s.getUser(user.id)).version, user.version + 1)
    })

    it('the same key with another body, path or method is 422 idempotency_key_reused and changes nothing', async (t) => {
      const s = await start(t)
      const json = { email: uniqueEmail(), name: 'First' }
      const first = await s.call('POST', '/users', { json, headers: keyed(KEY) })
      const user = first.json<User>()
      // A second key, sent with a PATCH: the same path and body bytes with another method differ.
      const patchKey = '"patch-then-delete"'
      const patch = JSON.stringify({ name: 'Patched' })
      const patched = await s.call('PATCH', `/users/${user.id}`, {
        body: patch,
        contentType: 'application/json',
        headers: keyed(patchKey),
      })
      assert.equal(patched.status, 200, patched.text)
      await assertUnchangedBy(s, async () => {
        const sameBytes = await s.call('DELETE', `/users/${user.id}`, {
          body: patch,
          contentType: 'application/json',
          headers: keyed(patchKey),
        })
        assertProblem(sameBytes, 422, 'idempotency_key_reused')
        // One space more is another body.
        const spaced = await s.call('POST', '/users', {
          body: ` ${JSON.stringify(json)}`,
          contentType: 'application/json',
          headers: keyed(KEY),
        })
        assertProblem(spaced, 422, 'idempotency_key_reused')
        const other = await s.call('PATCH', `/users/${user.id}`, {
          json: { name: 'Other' },
          headers: keyed(KEY),
        })
        assertProblem(other, 422, 'idempotency_key_reused')
        const deleted = await s.call('DELETE', `/users/${user.id}`, { headers: keyed(KEY) })
        assertProblem(deleted, 422, 'idempotency_key_reused')
      })
      assert.deepEqual(
        (await eventsOf(s)).map((event) => event.type),
        ['user.created', 'user.updated'],
      )
    })

    it('a key belongs to its subject: two subjects with one key make two users', async (t) => {
      const s = await start(t)
      const a = await s.call('POST', '/users', {
        json: { email: uniqueEmail(), name: 'A' },
        token: makeToken({ sub: 'client-a' }),
        headers: keyed(KEY),
      })
      const b = await s.call('POST', '/users', {
        json: { email: uniqueEmail(), name: 'B' },
        token: makeToken({ sub: 'client-b' }),
        headers: keyed(KEY),
      })
      assert.equal(a.status, 201, a.text)
      assert.equal(b.status, 201, b.text)
      assert.equal(b.headers.get('idempotent-replayed'), null)
      assert.equal((await s.snapshot()).length, 2)
    })

    it('a malformed key is 400 invalid_idempotency_key and changes nothing', async (t) => {
      const s = await start(t)
      const user = await s.createUser()
      const bad = [
        'abc',
        '""',
        `"${'k'.repeat(256)}"`,
        '"a", "b"',
        '1',
        '?1',
        ':YWJj:',
        '"a" x',
        ' ',
      ]
      await assertUnchangedBy(s, async () => {
        for (const key of bad) {
          const res = await s.call('POST', '/users', {
            json: { email: uniqueEmail(), name: 'Bad key' },
            headers: keyed(key),
          })
          assertProblem(res, 400, 'invalid_idempotency_key')
          const patch = await s.call('PATCH', `/users/${user.id}`, {
            json: { name: 'Bad key' },
            headers: keyed(key),
          })
          assertProblem(patch, 400, 'invalid_idempotency_key')
        }
      })
    })

    it('a refused request keeps nothing: the corrected request runs with the same key', async (t) => {
      const s = await start(t)
      const bad = await assertUnchangedBy(s, () =>
        s.call('POST', '/users', {
          json: { email: 'not-an-email', name: 'X' },
          headers: keyed(KEY),
        }),
      )
      assertProblem(bad, 422, 'validation_failed')
      const good = await s.call('POST', '/users', {
        json: { email: uniqueEmail(), name: 'X' },
        headers: keyed(KEY),
      })
      assert.equal(good.status, 201, good.text)
      assert.equal(good.headers.get('idempotent-replayed'), null)
    })

    it('a success that changed nothing is kept too, and replayed after a later change', async (t) => {
      const s = await start(t)
      const user = await s.createUser()
      const empty = await s.call('PATCH', `/users/${user.id}`, { json: {}, headers: keyed(KEY) })
      assert.equal(empty.status, 200, empty.text)
      assert.equal(empty.json<User>().version, user.version)
      await s.call('PATCH', `/users/${user.id}`, { json: { name: 'Later' } })
      const replay = await s.call('PATCH', `/users/${user.id}`, { json: {}, headers: keyed(KEY) })
      assertReplayOf(replay, empty)
      assert.equal(replay.json<User>().name, user.name)
    })

    it('DELETE, :activate, :suspend and :revokeTokens replay their answers; a DELETE body counts', async (t) => {
      const s = await start(t)
      const user = await s.createUser()
      const calls: [string, string, number][] = [
        ['POST', `/users/${user.id}:activate`, 200],
        ['POST', `/users/${user.id}:suspend`, 200],
        ['POST', `/users/${user.id}:revokeTokens`, 200],
        ['DELETE', `/users/${user.id}`, 204],
      ]
      for (const [index, [method, target, status]] of calls.entries()) {
        const headers = keyed(`"call-${index}"`)
        const first = await s.call(method, target, { headers })
        assert.equal(first.status, status, first.text)
        assertReplayOf(await s.call(method, target, { headers }), first)
      }
      // A DELETE ignores a body, but sent with a key it is part of the request: another body (or
      // one where there was none) is another request, and the same body replays.
      const other = await s.createUser()
      const headers = keyed('"delete-with-a-body"')
      const sent = { body: 'aaa', contentType: 'text/plain', headers }
      const first = await s.call('DELETE', `/users/${other.id}`, sent)
      assert.equal(first.status, 204, first.text)
      assertReplayOf(await s.call('DELETE', `/users/${other.id}`, sent), first)
      for (const options of [{ ...sent, body: 'bbb' }, { headers }]) {
        const refused = await s.call('DELETE', `/users/${other.id}`, options)
        assertProblem(refused, 422, 'idempotency_key_reused')
      }
      assert.deepEqual(
        (await eventsOf(s, user.id)).map((event) => event.type),
        ['user.created', 'user.activated', 'user.suspended', 'user.tokens_revoked', 'user.deleted'],
      )
      assert.deepEqual(
        (await eventsOf(s, other.id)).map((event) => event.type),
        ['user.created', 'user.deleted'],
      )
    })

    it('a DELETE body over 64 KiB is 413 with a key and ignored without one', async (t) => {
      const s = await start(t)
      const user = await s.createUser()
      const big = { body: 'x'.repeat(64 * 1024 + 1), contentType: 'text/plain' }
      const keyedDelete = await s.call('DELETE', `/users/${user.id}`, {
        ...big,
        headers: keyed('"big-delete"'),
      })
      assertProblem(keyedDelete, 413, 'payload_too_large')
      assert.equal((await s.call('GET', `/users/${user.id}`)).status, 200)
      const plain = await s.call('DELETE', `/users/${user.id}`, big)
      assert.equal(plain.status, 204, plain.text)
      assert.equal((await s.call('GET', `/users/${user.id}`)).status, 404)
    })

    it('every other route ignores the header, whatever it holds', async (t) => {
      const s = await start(t)
      const user = await s.createUser()
      for (const target of [`/users/${user.id}`, '/users', '/openapi.json']) {
        const res = await s.call('GET', target, { headers: keyed('not a key') })
        assert.equal(res.status, 200, `${target}: ${res.text}`)
      }
    })

    it('a request in flight holds its key: another is 409 idempotency_key_in_use at once, then replays', async (t) => {
      const s = await start(t)
      const body = JSON.stringify({ email: uniqueEmail(), name: 'Slow' })
      const held = await heldRequest(s, 'POST', '/users', KEY, body)
      const second = await s.call('POST', '/users', {
        body,
        contentType: 'application/json',
        headers: keyed(KEY),
      })
      assertProblem(second, 409, 'idempotency_key_in_use')
      assert.equal(second.headers.get('retry-after'), '1')
      // Whatever its payload.
      const other = await s.call('POST', '/users', {
        json: { email: uniqueEmail(), name: 'Other' },
        headers: keyed(KEY),
      })
      assertProblem(other, 409, 'idempotency_key_in_use')
      const raw = await held.finish()
      assert.match(raw, /^HTTP\/1\.1 201 /)
      const replay = await s.call('POST', '/users', {
        body,
        contentType: 'application/json',
        headers: keyed(KEY),
      })
      assert.equal(replay.status, 201, replay.text)
      assert.equal(replay.headers.get('idempotent-replayed'), 'true')
      assert.equal((await s.snapshot()).length, 1)
    })

    it('50 concurrent requests with one key make exactly one change', async (t) => {
      const s = await start(t)
      const json = { email: uniqueEmail(), name: 'Racer' }
      const answers = await Promise.all(
        Array.from({ length: 50 }, () => s.call('POST', '/users', { json, headers: keyed(KEY) })),
      )
      const ran = answers.filter(
        (res) => res.status === 201 && res.headers.get('idempotent-replayed') === null,
      )
      assert.equal(ran.length, 1)
      for (const res of answers) {
        if (res.status === 409) assertProblem(res, 409, 'idempotency_key_in_use')
        else assert.equal(res.status, 201, res.text)
      }
      assert.equal((await s.snapshot()).length, 1)
      assert.equal((await eventsOf(s)).length, 1)
    })

    it('a key is forgotten after IDEMPOTENCY_TTL_S: the same key makes a new request', async (t) => {
      const s = await start(t, { idempotencyTtlS: 1 })
      const first = await s.call('POST', '/users', {
        json: { email: uniqueEmail(), name: 'One' },
        headers: keyed(KEY),
      })
      assert.equal(first.status, 201, first.text)
      await new Promise((resolve) => setTimeout(resolve, 2200))
      const again = await s.call('POST', '/users', {
        json: { email: uniqueEmail(), name: 'Two' },
        headers: keyed(KEY),
      })
      assert.equal(again.status, 201, again.text)
      assert.equal(again.headers.get('idempotent-replayed'), null)
      assert.equal((await s.snapshot()).length, 2)
    })

    it('refusals before the key: 401, 415 and an announced 413 hold nothing and come first', async (t) => {
      const s = await start(t)
      const json = { email: uniqueEmail(), name: 'Order' }
      const unauthorized = await s.call('POST', '/users', {
        json,
        token: 'nope',
        headers: keyed('bad key'),
      })
      assertProblem(unauthorized, 401, 'token_invalid')
      const media = await s.call('POST', '/users', {
        body: JSON.stringify(json),
        contentType: 'text/plain',
        headers: keyed('bad key'),
      })
      assertProblem(media, 415, 'unsupported_media_type')
      const large = await s.call('POST', '/users', {
        body: JSON.stringify({ ...json, name: 'x'.repeat(70_000) }),
        contentType: 'application/json',
        headers: keyed('bad key'),
      })
      assertProblem(large, 413, 'payload_too_large')
      // The key's syntax before the body's.
      const syntax = await s.call('POST', '/users', {
        body: '{',
        contentType: 'application/json',
        headers: keyed('bad key'),
      })
      assertProblem(syntax, 400, 'invalid_idempotency_key')
      const ok = await s.call('POST', '/users', { json, headers: keyed(KEY) })
      assert.equal(ok.status, 201, ok.text)
    })

    // 400 for the path's encoding comes before the key's 409 in use and its 422 (§15's order).
    it("a malformed path encoding is 400 before a kept key's 422 and before its 409 in use", async (t) => {
      const s = await start(t)
      const user = await s.createUser()
      const patch = (target: string, key: string) =>
        s.call('PATCH', target, {
          body: '{"name":"Enc"}',
          contentType: 'application/merge-patch+json',
          headers: keyed(key),
        })
      assert.equal((await patch(`/users/${user.id}`, KEY)).status, 200)
      const before = await s.snapshot()
      assertProblem(await patch('/users/%zz', KEY), 400, 'bad_request')
      // The key held by a request whose body has not arrived yet.
      const holder = await heldRequest(s, 'POST', '/users', '"held"', '{"name":"No email"}')
      assertProblem(await patch('/users/%zz', '"held"'), 400, 'bad_request')
      assertProblem(await patch(`/users/${user.id}`, '"held"'), 409, 'idempotency_key_in_use')
      assert.match(await holder.finish(), /^HTTP\/1\.1 422 /)
      assert.deepEqual(await s.snapshot(), before)
    })
  })
}

describe('Idempotency-Key and CORS', () => {
  it('a preflight allows the header and answers expose Idempotent-Replayed', async (t) => {
    const s = await startService(t, {
      store: new MemoryStore(),
      corsOrigins: ['https://app.example'],
    })
    const pre = await s.call('OPTIONS', '/users', {
      token: undefined,
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'idempotency-key',
      },
    })
    assert.equal(pre.status, 204)
    assert.match(pre.headers.get('access-control-allow-headers') ?? '', /\bIdempotency-Key\b/)
    const res = await s.call('POST', '/users', {
      json: { email: uniqueEmail(), name: 'Cors' },
      headers: { origin: 'https://app.example', 'idempotency-key': KEY },
    })
    assert.equal(res.status, 201)
    assert.match(res.headers.get('access-control-expose-headers') ?? '', /\bIdempotent-Replayed\b/)
  })
})
