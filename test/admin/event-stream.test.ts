import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import {
  type FetchLike,
  followEvents,
  type LiveState,
  liveStatus,
  SseParser,
  type StreamEvent,
} from '../../admin/src/event-stream.js'
import { startService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const READER = makeToken({ scope: 'users:read events:read' })

describe('the admin page: reading Server-Sent Events', () => {
  it('reads events cut anywhere, skips comments, keeps the last id, joins data lines', () => {
    const parser = new SseParser()
    const text =
      ': keep-alive\n\nid: 01\nevent: user.created\ndata: {"a":1}\n\n' +
      'id: 02\r\nevent: user.updated\r\ndata: line one\r\ndata:line two\r\n\r\n' +
      'data: no id nor type\n\n'
    const events: StreamEvent[] = []
    // One character at a time: every cut a network may make.
    for (const char of text) events.push(...parser.push(char))
    assert.deepEqual(events, [
      { id: '01', event: 'user.created', data: '{"a":1}' },
      { id: '02', event: 'user.updated', data: 'line one\nline two' },
      { id: '02', event: 'message', data: 'no id nor type' },
    ])
    assert.deepEqual(parser.push('data: unfinished\n'), [])
  })
})

interface Sent {
  readonly headers: Headers
  /** How many events had been handed over when the request was made. */
  readonly delivered: number
}

/**
 * The real fetch, with each request's headers noted, and the first stream ended after its
 * `cut`-th blank line: closed, or failed (as a dropped connection makes a body's read fail).
 */
function cuttingFetch(
  cut: number,
  delivered: () => number,
  end: 'close' | 'fail',
): { fetch: FetchLike; sent: Sent[] } {
  const sent: Sent[] = []
  let streams = 0
  const fetchLike: FetchLike = async (url, init) => {
    const headers = new Headers(init.headers)
    sent.push({ headers, delivered: delivered() })
    const res = await fetch(new URL(url), init)
    if (headers.get('accept') !== 'text/event-stream' || res.body === null) return res
    streams += 1
    if (streams > 1) return res
    // The first stream ends (as a dropped connection does) once `cut` events have come through.
    const reader = res.body.getReader()
    let seen = ''
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read()
        if (done) {
          controller.close()
          return
        }
        controller.enqueue(value)
        seen += new TextDecoder().decode(value)
        if ((seen.match(/\n\n/g) ?? []).length >= cut) {
          if (end === 'close') controller.close()
          else controller.error(new TypeError('network error'))
          await reader.cancel()
        }
      },
    })
    return new Response(body, { status: res.status, headers: res.headers })
  }
  return { fetch: fetchLike, sent }
}

describe('the admin page: following the change feed through fetch', { timeout: 60_000 }, () => {
  for (const end of ['close', 'fail'] as const) {
    it(`starts at the end of the feed, resumes with Last-Event-ID after a stream that ends (${end}), and misses or repeats nothing`, async (t) => {
      const s = await startService(t, { eventStreams: { heartbeatMs: 60_000 } })
      const before = await s.createUser({ name: 'Before' })
      const events: StreamEvent[] = []
      const { fetch: fetchLike, sent } = cuttingFetch(2, () => events.length, end)
      const states: LiveState[] = []
      const stop = new AbortController()
      const done = followEvents({
        url: `${s.baseUrl}/events`,
        token: READER,
        fetch: fetchLike,
        signal: stop.signal,
        retryMs: 50,
        onEvent: (event) => events.push(event),
        onState: (state) => states.push(state),
      })
      const until = async (check: () => boolean): Promise<void> => {
        const end = Date.now() + 10_000
        while (!check() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 20))
        assert.ok(check())
      }
      await until(() => states.includes('live'))
      const made = []
      for (const name of ['One', 'Two', 'Three', 'Four']) made.push(await s.createUser({ name }))
      await until(() => events.length >= 4)
      stop.abort()
      await done

      // The user made before it started is not replayed; each later one once, in order.
      assert.ok(!events.some((event) => event.data.includes(before.id)))
      assert.deepEqual(
        events.map((event) => [event.event, (JSON.parse(event.data) as { userId: string }).userId]),
        made.map((user) => ['user.created', user.id]),
      )
      // The second stream asked to resume after the last event the first one delivered.
      const streams = sent.filter((item) => item.headers.get('accept') === 'text/event-stream')
      assert.ok(streams.length >= 2, `${streams.length} streams`)
      const resumed = streams[1]
      assert.ok(resumed !== undefined && resumed.delivered >= 1 && resumed.delivered < 4)
      assert.equal(resumed.headers.get('last-event-id'), events[resumed.delivered - 1]?.id)
      assert.equal(streams[0]?.headers.get('authorization'), `Bearer ${READER}`)
      // The first stream started where the walk of the feed's pages ended: after `before`'s event.
      assert.match(streams[0]?.headers.get('last-event-id') ?? '', /^[0-9a-f]{16}$/)
      assert.ok(states.includes('reconnecting'))
      assert.equal(states.at(-1), 'stopped')
    })
  }

  // With rate limits on, a long feed's walk to its end may meet a 429 midway: it goes on from the
  // page it reached once the window allows, rather than walk again from the start (which, with a
  // quota below the walk's pages, spent every window of the subject and never got live).
  it('walks a long feed to its end across rate-limit windows, resuming where a 429 stopped it', async (t) => {
    const s = await startService(t, {
      rateLimitSubject: { quota: 2, windowSeconds: 1 },
      eventStreams: { heartbeatMs: 60_000 },
    })
    const lines = Array.from({ length: 3500 }, (_, i) => `{"email":"walk${i}@x.io","name":"W"}\n`)
    const imported = await fetch(`${s.baseUrl}/users:import`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${makeToken({ sub: 'importer' })}`,
        'content-type': 'application/x-ndjson',
      },
      body: lines.join(''),
    })
    assert.equal((await imported.text()).match(/"status":201/g)?.length, 3500)
    const pages: string[] = []
    const states: LiveState[] = []
    const stop = new AbortController()
    const done = followEvents({
      url: `${s.baseUrl}/events`,
      token: READER,
      fetch: async (url, init) => {
        const res = await fetch(new URL(url), init)
        if (res.status === 200 && !url.includes('text/event-stream')) pages.push(url)
        return res
      },
      signal: stop.signal,
      retryMs: 50,
      onEvent: () => {},
      onState: (state) => states.push(state),
    })
    const end = Date.now() + 15_000
    while (!states.includes('live') && Date.now() < end) {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    stop.abort()
    await done
    assert.ok(states.includes('live'), `never live, ${states.length} states`)
    // Four pages of 1000 (the last one short), each read once: the 429s restarted nothing.
    const walked = pages.filter((url) => url.includes('limit='))
    assert.equal(walked.length, 4, walked.join('\n'))
    assert.equal(walked.filter((url) => !url.includes('after=')).length, 1)
  })

  it('ends as unavailable, without retrying, for a token that may not read events', async (t) => {
    const s = await startService(t)
    const states: LiveState[] = []
    const { fetch: fetchLike, sent } = cuttingFetch(1, () => 0, 'close')
    await followEvents({
      url: `${s.baseUrl}/events`,
      token: makeToken({ scope: 'users:read' }),
      fetch: fetchLike,
      signal: new AbortController().signal,
      retryMs: 10,
      onEvent: () => assert.fail('no event'),
      onState: (state) => states.push(state),
    })
    assert.deepEqual(states, ['connecting', 'unavailable'])
    assert.equal(sent.length, 1)
  })

  it('says why the feed refused the token, by its problem code: expired, revoked, or no events:read', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const revokedToken = makeToken({ sub: user.id, scope: 'users:read events:read' })
    assert.equal((await s.call('POST', `/users/${user.id}:revokeTokens`)).status, 200)
    const cases = [
      [makeToken({ scope: 'users:read events:read', ttl: -600 }), 'token_expired', /expired/],
      [revokedToken, 'token_revoked', /revoked/],
      [makeToken({ scope: 'users:read' }), 'insufficient_scope', /cannot read events/],
    ] as const
    for (const [token, code, said] of cases) {
      const states: [LiveState, string | undefined][] = []
      await followEvents({
        url: `${s.baseUrl}/events`,
        token,
        fetch: (url, init) => fetch(new URL(url), init),
        signal: new AbortController().signal,
        retryMs: 10,
        onEvent: () => assert.fail('no event'),
        onState: (state, refused) => states.push([state, refused]),
      })
      assert.deepEqual(states.at(-1), ['unavailable', code], code)
      assert.match(liveStatus('unavailable', code), said)
    }
    assert.equal(liveStatus('unavailable', 'constructor'), liveStatus('unavailable'))
  })
})
