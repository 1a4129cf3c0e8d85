import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { describe, it } from 'node:test'

import { openSse } from '../events/sse-client.js'
import { assertProblem } from '../helpers/http.js'
import { startService, type TestService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })

async function until(
  check: () => Promise<boolean>,
  what: string,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

async function openStreams(svc: TestService): Promise<number> {
  const text = (await svc.call('GET', `${svc.url}/metrics`)).text
  return Number(/^user_service_event_streams (\d+)$/m.exec(text)?.[1] ?? 'NaN')
}

function bigMetadata(seed: number): Record<string, string> {
  const metadata: Record<string, string> = {}
  for (let i = 0; i < 32; i += 1) metadata[`key_${i}`] = `${seed}-${i}-`.padEnd(512, 'x')
  return metadata
}

describe('GET /events as text/event-stream', () => {
  it('streams the backlog then live events while another client writes, and resumes with Last-Event-ID without gap or duplicate', async (t) => {
    const svc = await startService(t, { eventStreams: { heartbeatMs: 100 } })
    const before = await svc.createUser()
    const stream = await openSse(`${svc.baseUrl}/events`, reader)
    t.after(() => {
      stream.close()
    })
    assert.equal(stream.status, 200)
    assert.match(String(stream.headers['content-type']), /^text\/event-stream/)
    assert.equal(stream.headers['cache-control'], 'no-store')
    await stream.waitFor(1)
    const written: string[] = [before.id]
    for (let i = 0; i < 5; i += 1) written.push((await svc.createUser()).id)
    await stream.waitFor(6)
    await stream.waitForComment()
    assert.ok(stream.comments.every((line) => line.startsWith(':')))
    stream.close()
    const seen = stream.events.map((event) => event.id)
    const last = seen.at(-1) ?? ''
    // Written while nobody listens: the reconnect must bring exactly these, in order.
    for (let i = 0; i < 4; i += 1) written.push((await svc.createUser()).id)
    const again = await openSse(`${svc.baseUrl}/events`, reader, { 'last-event-id': last })
    t.after(() => {
      again.close()
    })
    const live = svc.createUser().then((user) => {
      written.push(user.id)
    })
    await live
    await again.waitFor(5)
    const all = [...stream.events, ...again.events]
    assert.equal(new Set(all.map((event) => event.id)).size, all.length, 'no duplicate')
    assert.deepEqual(
      all.map((event) => (JSON.parse(event.data) as { userId: string }).userId),
      written,
      'no gap, in order',
    )
    for (const event of all) {
      assert.equal(event.event, 'user.created')
      assert.equal((JSON.parse(event.data) as { id: string }).id, event.id)
    }
    const ids = all.map((event) => event.id)
    assert.deepEqual([...ids].sort(), ids)
  })

  it('cuts off a consumer that does not read once its buffer passes the bound, while another keeps flowing', async (t) => {
    const svc = await startService(t, {
      eventStreams: { maxBufferBytes: 16 * 1024, stallMs: 3000 },
    })
    // About 8 MB of backlog: more than the kernel's socket buffers and the bound together.
    const count = 450
    for (let i = 0; i < count; i += 25) {
      await Promise.all(
        Array.from({ length: 25 }, (_, j) => svc.createUser({ metadata: bigMetadata(i + j) })),
      )
    }
    const { hostname, port } = new URL(svc.url)
    const slow = connect(Number(port), hostname)
    t.after(() => {
      slow.destroy()
    })
    slow.write(
      `GET /events HTTP/1.1\r\nhost: ${hostname}\r\naccept: text/event-stream\r\nauthorization: Bearer ${reader}\r\n\r\n`,
    )
    slow.pause()
    const good = await openSse(`${svc.baseUrl}/events`, reader)
    t.after(() => {
      good.close()
    })
    await good.waitFor(count, 60_000)
    // The slow one is gone; the good one is still open and takes a live event.
    await until(async () => (await openStreams(svc)) === 1, 'the slow consumer to be cut off')
    const next = await svc.createUser()
    await good.waitFor(count + 1)
    assert.equal(
      (JSON.parse(good.events[count]?.data ?? '{}') as { userId: string }).userId,
      next.id,
    )
    let received = ''
    const closed = new Promise<void>((resolve) => {
      slow.on('close', () => {
        resolve()
      })
    })
    slow.setEncoding('latin1')
    slow.on('data', (chunk: string) => {
      received += chunk
    })
    slow.resume()
    await closed
    const delivered = received.split('\nevent: ').length - 1
    assert.ok(
      delivered < count,
      `the slow consumer got ${delivered} of ${count} events before it was cut off`,
    )
    assert.doesNotMatch(received, /\r\n0\r\n\r\n$/, 'the stream was cut, not ended')
  })

  it('answers 503 overloaded past MAX_EVENT_STREAMS, and takes a stream again once one closes', async (t) => {
    const svc = await startService(t, { maxEventStreams: 2 })
    const a = await openSse(`${svc.baseUrl}/events`, reader)
    const b = await openSse(`${svc.baseUrl}/events`, reader)
    t.after(() => {
      a.close()
      b.close()
    })
    assert.equal(a.status, 200)
    assert.equal(b.status, 200)
    const refused = await svc.call('GET', '/events', {
      token: reader,
      headers: { accept: 'text/event-stream' },
    })
    assertProblem(refused, 503, 'overloaded')
    assert.ok(refused.headers.get('retry-after') !== null)
    // This 503 comes after the token and the query: only a client allowed to stream learns it.
    const stream = { accept: 'text/event-stream' }
    assertProblem(
      await svc.call('GET', '/events', { token: undefined, headers: stream }),
      401,
      'token_missing',
    )
    assertProblem(
      await svc.call('GET', '/events', {
        token: reader,
        headers: { ...stream, 'last-event-id': 'x' },
      }),
      400,
      'bad_request',
    )
    // Pages are not streams: they still work.
    assert.equal((await svc.call('GET', '/events', { token: reader })).status, 200)
    a.close()
    await until(async () => (await openStreams(svc)) === 1, 'the closed stream to be counted out')
    const c = await openSse(`${svc.baseUrl}/events`, reader)
    t.after(() => {
      c.close()
    })
    assert.equal(c.status, 200)
  })

  it('answers 400 for a malformed Last-Event-ID and 403 without events:read, before any stream starts', async (t) => {
    const svc = await startService(t)
    const bad = await svc.call('GET', '/events', {
      token: reader,
      headers: { accept: 'text/event-stream', 'last-event-id': 'nope' },
    })
    assertProblem(bad, 400, 'bad_request')
    const forbidden = await svc.call('GET', '/events', { headers: { accept: 'text/event-stream' } })
    assertProblem(forbidden, 403, 'insufficient_scope')
  })

  it("sends the CORS headers on a stream to an allowed origin, and answers HEAD with the stream's head and no stream", async (t) => {
    const svc = await startService(t, { corsOrigins: ['https://app.example.com'] })
    const stream = await openSse(`${svc.baseUrl}/events`, reader, {
      origin: 'https://app.example.com',
    })
    t.after(() => {
      stream.close()
    })
    assert.equal(stream.status, 200)
    assert.equal(stream.headers['access-control-allow-origin'], 'https://app.example.com')
    // RFC 9110 §9.3.2: the header fields its GET would get; §8.6: no Content-Length, as GET's
    // stream has none. The answer ends at once and holds no stream slot.
    const head = await svc.call('HEAD', '/events', {
      token: reader,
      headers: { accept: 'text/event-stream', origin: 'https://app.example.com' },
    })
    assert.equal(head.status, 200)
    assert.equal(head.headers.get('content-type'), 'text/event-stream; charset=utf-8')
    assert.equal(head.headers.get('cache-control'), 'no-store')
    assert.equal(head.headers.get('content-length'), null)
    assert.equal(head.headers.get('access-control-allow-origin'), 'https://app.example.com')
    assert.equal(head.text, '')
    stream.close()
    await until(async () => (await openStreams(svc)) === 0, 'the stream slots given back')
  })

  // RFC 9110 §12.4.2: a weight of 0 is "not acceptable"; a client that prefers JSON gets a page.
  for (const accept of [
    'text/event-stream;q=0',
    'application/json, text/event-stream;q=0.5',
    'application/json;q=1, text/event-stream;q=0.1',
    'text/event-stream;q=nope',
    // A quoted parameter value is one value, its commas and semicolons included.
    'text/event-stream;profile="a,b";q=0',
    '*/*',
    'text/*',
  ]) {
    it(`answers Accept: ${accept} with a JSON page, not a stream`, async (t) => {
      const svc = await startService(t)
      await svc.createUser()
      const page = await svc.call('GET', '/events', { token: reader, headers: { accept } })
      assert.equal(page.status, 200)
      assert.match(page.headers.get('content-type') ?? '', /^application\/json/)
      assert.equal((page.body as { items: unknown[] }).items.length, 1)
    })
  }

  for (const accept of [
    'text/event-stream',
    'TEXT/Event-Stream; charset=utf-8',
    'application/json;q=0.5, text/event-stream',
    'text/event-stream, application/json',
    'text/event-stream;q=0.3, application/*;q=0.2',
    'text/event-stream;profile="a;q=0"',
  ]) {
    it(`answers Accept: ${accept} with a stream`, async (t) => {
      const svc = await startService(t)
      const stream = await openSse(`${svc.baseUrl}/events`, reader, { accept })
      t.after(() => {
        stream.close()
      })
      assert.equal(stream.status, 200)
      assert.match(String(stream.headers['content-type']), /^text\/event-stream/)
    })
  }

  it('ends open streams cleanly when the service closes', async (t) => {
    const svc = await startService(t)
    const stream = await openSse(`${svc.baseUrl}/events`, reader)
    await svc.createUser()
    await stream.waitFor(1)
    const started = Date.now()
    await svc.service.close()
    await stream.ended
    assert.ok(stream.response.complete, 'the response ended with its last chunk, not a reset')
    assert.ok(Date.now() - started < 9000, 'close() did not wait for its time-out')
  })
})
