// A request's Idempotency-Key from its headers to its answer, against a store of kept keys the
// test answers for (the store's own rules have their suites under test/store/).
import assert from 'node:assert/strict'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, it, type TestContext } from 'node:test'

import type { KeptKey } from '../src/domain/kept-key.js'
import { ClientClosedError } from '../src/http/body.js'
import { HttpError, toHttpError } from '../src/http/problem.js'
import { type HeldKey, RequestKeys, serveKeyed } from '../src/request-idempotency.js'
import { startRequest } from '../src/request-state.js'
import { type Answer, type Route, STREAMED } from '../src/routes/route.js'
import { createUser } from '../src/routes/users/create-user.js'
import type { KeptKeys, KeyHold } from '../src/store/kept-keys.js'
import { createMemoryLogger } from './helpers/service.js'

const NOW = 1_900_000_000_000

/** Kept keys in a Map, every call recorded; `hold` answers what the test says. */
function scriptedKeys(answerHold: () => Promise<KeyHold> = async () => 'held') {
  const calls: string[] = []
  const kept = new Map<string, KeptKey>()
  let failRelease = false
  let paused: { asked: () => void; opened: Promise<void> } | undefined
  const keys: KeptKeys = {
    async find(subject, key) {
      calls.push(`find ${subject} ${key}`)
      return kept.get(`${subject} ${key}`)
    },
    hold(subject, key) {
      calls.push(`hold ${subject} ${key}`)
      return answerHold()
    },
    async release(subject, key) {
      calls.push(`release ${subject} ${key}`)
      if (paused !== undefined) {
        paused.asked()
        await paused.opened
      }
      if (failRelease) throw new Error('the database is away')
    },
    async keepAlone(key) {
      calls.push(`keepAlone ${key.subject} ${key.key}`)
      kept.set(`${key.subject} ${key.key}`, key)
    },
  }
  return {
    keys,
    calls,
    kept,
    failReleases: () => {
      failRelease = true
    },
    /** Releases wait from now until `open()`; `asked` resolves at the first one. */
    pauseReleases() {
      let ask = (): void => {}
      let open = (): void => {}
      const asked = new Promise<void>((resolve) => {
        ask = resolve
      })
      const opened = new Promise<void>((resolve) => {
        open = resolve
      })
      paused = { asked: ask, opened }
      return { asked, open }
    },
  }
}

function requestKeys(keys: KeptKeys, extra: { writeGate?: () => void } = {}) {
  const lines: Record<string, unknown>[] = []
  const requests = new RequestKeys({
    keys,
    ttlSeconds: 60,
    now: () => NOW,
    logger: createMemoryLogger(lines),
    ...extra,
  })
  return { requests, lines }
}

function held(requests: RequestKeys, key: string, subject = 'alice'): HeldKey {
  const found = requests.hold(`"${key}"`, subject)
  assert.ok(found !== undefined)
  return found
}

function assertHttpError(error: unknown, code: string, status: number): true {
  assert.ok(error instanceof HttpError, `not an HttpError: ${String(error)}`)
  assert.equal(error.code, code)
  assert.equal(error.status, status)
  return true
}

describe("a request's Idempotency-Key in this process", () => {
  it('is no key without the header', () => {
    const { requests } = requestKeys(scriptedKeys().keys)
    assert.equal(requests.hold(undefined, 'alice'), undefined)
  })

  it("refuses the same subject's key while held, with 409 and Retry-After, and frees it at the end", async () => {
    const store = scriptedKeys()
    const { requests } = requestKeys(store.keys)
    const first = held(requests, 'k')
    assert.throws(
      () => requests.hold('"k"', 'alice'),
      (error: unknown) => {
        assertHttpError(error, 'idempotency_key_in_use', 409)
        assert.ok(error instanceof HttpError)
        assert.deepEqual(error.headers, { 'retry-after': '1' })
        assert.match(error.detail, /in flight/)
        return true
      },
    )
    // Another subject's key of the same text is another key.
    assert.notEqual(requests.hold('"k"', 'bob'), undefined)
    await first.end()
    await first.end()
    assert.notEqual(requests.hold('"k"', 'alice'), undefined)
    assert.deepEqual(store.calls, [], 'a key never held in the store is not released there')
  })
})

describe('a key held against the other processes', () => {
  it('is a 409 while another process holds it, and nothing is released', async () => {
    const store = scriptedKeys(async () => 'in_use')
    const { requests } = requestKeys(store.keys)
    const key = held(requests, 'k')
    await assert.rejects(key.holdInStore(), (error) =>
      assertHttpError(error, 'idempotency_key_in_use', 409),
    )
    await key.end()
    assert.deepEqual(store.calls, ['hold alice k'])
  })

  it('is given back when its request ends without its key kept, once', async () => {
    const store = scriptedKeys()
    const { requests } = requestKeys(store.keys)
    const key = held(requests, 'k')
    await key.holdInStore()
    await key.end()
    await key.end()
    assert.deepEqual(store.calls, ['hold alice k', 'release alice k'])
  })

  it('is given back at once when its request ended while the store was asked', async () => {
    let grant: ((hold: KeyHold) => void) | undefined
    const store = scriptedKeys(
      () =>
        new Promise<KeyHold>((resolve) => {
          grant = resolve
        }),
    )
    const { requests } = requestKeys(store.keys)
    const key = held(requests, 'k')
    const holding = key.holdInStore()
    await key.end()
    grant?.('held')
    await assert.rejects(holding, ClientClosedError)
    assert.deepEqual(store.calls, ['hold alice k', 'release alice k'])
  })

  it('logs a release the store refused, and lets its request end', async () => {
    const store = scriptedKeys()
    store.failReleases()
    const { requests, lines } = requestKeys(store.keys)
    const key = held(requests, 'k')
    await key.holdInStore()
    await key.end()
    assert.deepEqual(lines, [
      {
        level: 'warn',
        msg: 'could not release an Idempotency-Key',
        error: 'Error: the database is away',
      },
    ])
  })
})

describe('a kept key', () => {
  const answer = {
    status: 201,
    body: '{"id":"x"}',
    etag: '"v1"',
    headers: { location: '/users/x', 'x-other': 'not kept' },
  }

  it('keeps the answer its request got, its fingerprint, and lives a second past its time to live', async () => {
    const { requests } = requestKeys(scriptedKeys().keys)
    const key = held(requests, 'k')
    await key.claim('POST', '/users', Buffer.from('{"a":1}'))
    const kept = key.keep(answer)
    assert.deepEqual(kept, {
      subject: 'alice',
      key: 'k',
      fingerprint: kept.fingerprint,
      answer: {
        status: 201,
        body: '{"id":"x"}',
        contentType: 'application/json',
        etag: '"v1"',
        headers: { location: '/users/x' },
      },
      expiresAt: NOW + 60_000 + 1000,
    })
    assert.match(kept.fingerprint, /^[0-9a-f]{64}$/)
    assert.deepEqual(key.keep({ status: 204 }).answer, { status: 204 })
    assert.equal(
      key.keep({ status: 200, body: 'x', contentType: 'text/plain' }).answer.contentType,
      'text/plain',
    )
  })

  it('replays the answer to the same method, path and body, and refuses any other with 422', async () => {
    const store = scriptedKeys()
    const { requests } = requestKeys(store.keys)
    const first = held(requests, 'k')
    await first.claim('POST', '/users', Buffer.from('{"a":1}'))
    store.kept.set('alice k', first.keep(answer))
    await first.end()

    const again = held(requests, 'k')
    const replay = await again.claim('POST', '/users', Buffer.from('{"a":1}'))
    assert.deepEqual(replay, {
      status: 201,
      body: '{"id":"x"}',
      contentType: 'application/json',
      etag: '"v1"',
      headers: { location: '/users/x', 'idempotent-replayed': 'true' },
    })
    for (const [method, path, body] of [
      ['PUT', '/users', '{"a":1}'],
      ['POST', '/users/', '{"a":1}'],
      ['POST', '/users', '{"a":2}'],
      ['POST', '/users', '{"a":1} '],
    ] as const) {
      await assert.rejects(again.claim(method, path, Buffer.from(body)), (error) => {
        assertHttpError(error, 'idempotency_key_reused', 422)
        assert.ok(error instanceof HttpError)
        assert.match(error.detail, /another request/)
        return true
      })
    }
    await again.end()
  })

  it('is kept alone, through the write gate, for a success whose change kept none; not for a failure', async () => {
    const store = scriptedKeys()
    let gated = 0
    const { requests } = requestKeys(store.keys, {
      writeGate: () => {
        gated += 1
      },
    })
    const refused = held(requests, 'refused')
    await refused.holdInStore()
    await refused.settle({ status: 409, body: '{}' })
    await refused.end()

    const unchanged = held(requests, 'unchanged')
    await unchanged.holdInStore()
    await unchanged.claim('PATCH', '/users/x', Buffer.from('{}'))
    await unchanged.settle({ status: 200, body: '{"id":"x"}' })
    await unchanged.end()

    const changed = held(requests, 'changed')
    await changed.holdInStore()
    changed.keep(answer)
    await changed.settle(answer)
    await changed.end()

    assert.equal(gated, 1)
    assert.deepEqual(store.calls, [
      'hold alice refused',
      'release alice refused',
      'hold alice unchanged',
      'find alice unchanged',
      'keepAlone alice unchanged',
      'hold alice changed',
    ])
    assert.equal(store.kept.get('alice unchanged')?.answer.status, 200)
  })

  it('is not kept for any answer outside 2xx', async () => {
    for (const status of [199, 300, 304]) {
      const store = scriptedKeys()
      const { requests } = requestKeys(store.keys)
      const key = held(requests, 'k')
      await key.holdInStore()
      await key.settle({ status })
      await key.end()
      assert.deepEqual(store.calls, ['hold alice k', 'release alice k'], `status ${status}`)
    }
    const store = scriptedKeys()
    const { requests } = requestKeys(store.keys)
    const key = held(requests, 'k')
    await key.settle({ status: 299 })
    assert.deepEqual(store.calls, ['keepAlone alice k'])
  })
})

/**
 * One keyed POST through a real server, its key held by `requests` and served by `serveKeyed`
 * with `run`; `outcome` is how serveKeyed settled (the server then answers 204 itself).
 */
async function serveOne(
  t: TestContext,
  requests: RequestKeys,
  route: Route,
  run: (req: IncomingMessage, body: unknown) => Answer | Promise<Answer>,
  body = '{"a":1}',
): Promise<{ outcome: Promise<{ answered: Answer } | { failed: unknown }> }> {
  let settled: (outcome: { answered: Answer } | { failed: unknown }) => void = () => {}
  const outcome = new Promise<{ answered: Answer } | { failed: unknown }>((resolve) => {
    settled = resolve
  })
  const server = createServer((req, res) => {
    const key = requests.hold(req.headers['idempotency-key'], 'alice')
    assert.ok(key !== undefined)
    serveKeyed(req, startRequest(req), route, key, (parsed) => run(req, parsed))
      .then(
        (answered) => settled({ answered }),
        (failed: unknown) => settled({ failed }),
      )
      .finally(() => res.writeHead(204).end())
  })
  server.listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  t.after(() => server.close())
  const { port } = server.address() as AddressInfo
  const sent = fetch(`http://127.0.0.1:${port}/users`, {
    method: 'POST',
    headers: { 'idempotency-key': '"k"', 'content-type': 'application/json' },
    body,
  })
  t.after(async () => {
    await (await sent).arrayBuffer()
  })
  return { outcome }
}

describe('a keyed request served', () => {
  it('gives its hold back before a refusal under 500 leaves, so the corrected request may follow at once', async (t) => {
    const store = scriptedKeys()
    const releases = store.pauseReleases()
    const { requests } = requestKeys(store.keys)
    const { outcome } = await serveOne(t, requests, createUser, () => {
      throw new HttpError('validation_failed', 'no')
    })
    let refused = false
    void outcome.then(() => {
      refused = true
    })
    const first = await Promise.race([
      releases.asked.then(() => 'release asked'),
      outcome.then(() => 'refused'),
    ])
    assert.equal(first, 'release asked', 'the refusal left before its hold was given back')
    // Turns of the loop for a refusal that did not wait for the release to be answered.
    for (let turn = 0; turn < 5; turn += 1) await new Promise((resolve) => setImmediate(resolve))
    assert.equal(refused, false, 'the refusal left before its hold was given back')
    releases.open()
    const settled = await outcome
    assert.ok('failed' in settled)
    assertHttpError(settled.failed, 'validation_failed', 422)
    assert.deepEqual(store.calls, ['hold alice k', 'find alice k', 'release alice k'])
  })

  for (const [name, fault, code, status] of [
    ['a 500', new Error('a bug'), 'internal', 500],
    ['a 503', new HttpError('storage_unavailable', 'the disk is away'), 'storage_unavailable', 503],
  ] as const) {
    it(`answers ${name} without waiting for its hold's release (the store may be what failed)`, async (t) => {
      const store = scriptedKeys()
      const releases = store.pauseReleases()
      const { requests } = requestKeys(store.keys)
      const { outcome } = await serveOne(t, requests, createUser, () => {
        throw fault
      })
      const first = await Promise.race([outcome, releases.asked.then(() => 'released first')])
      releases.open()
      assert.notEqual(first, 'released first')
      assert.ok(typeof first === 'object' && 'failed' in first)
      assert.equal(toHttpError(first.failed).code, code)
      assert.equal(toHttpError(first.failed).status, status)
      assert.deepEqual(store.calls, ['hold alice k', 'find alice k'])
    })
  }

  it('leaves a streamed body to its handler, and keeps no key for an answer it streamed', async (t) => {
    const store = scriptedKeys()
    const { requests } = requestKeys(store.keys)
    let given: unknown = 'nothing'
    let read = ''
    const { outcome } = await serveOne(
      t,
      requests,
      { ...createUser, body: 'stream' },
      async (req, body) => {
        given = body
        for await (const chunk of req) read += String(chunk)
        return STREAMED
      },
      'line one\nline two\n',
    )
    assert.deepEqual(await outcome, { answered: STREAMED })
    assert.equal(given, undefined)
    assert.equal(read, 'line one\nline two\n')
    assert.deepEqual(store.calls, ['hold alice k', 'find alice k'])
  })
})
