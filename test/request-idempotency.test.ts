// A request's Idempotency-Key from its headers to its answer, against a store of kept keys the
// test answers for (the store's own rules have their suites under test/store/).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { KeptKey } from '../src/domain/kept-key.js'
import { ClientClosedError } from '../src/http/body.js'
import { HttpError } from '../src/http/problem.js'
import { type HeldKey, RequestKeys } from '../src/request-idempotency.js'
import type { KeptKeys, KeyHold } from '../src/store/kept-keys.js'
import { createMemoryLogger } from './helpers/service.js'

const NOW = 1_900_000_000_000

/** Kept keys in a Map, every call recorded; `hold` answers what the test says. */
function scriptedKeys(answerHold: () => Promise<KeyHold> = async () => 'held') {
  const calls: string[] = []
  const kept = new Map<string, KeptKey>()
  let failRelease = false
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
