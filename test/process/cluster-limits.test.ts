import assert from 'node:assert/strict'
import { type ClientRequest, request as httpRequest, type IncomingMessage } from 'node:http'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { createClusterSlots } from '../../src/process/cluster-slots.js'
import { type RunningChild, sleep, startChild } from '../helpers/child.js'
import { request, type UserPage } from '../helpers/http.js'
import { freshDatabase, SKIP_POSTGRES } from '../helpers/postgres.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/**
 * WORKERS > 1 (docs/operations.md): MAX_EVENT_STREAMS and the one import at a time are the
 * service's limits, counted by the primary for every worker, not once per worker.
 */

const admin = makeToken()
const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })

/** The service with two workers on a fresh database, once both workers listen. */
async function startWorkers(t: TestContext, env: Record<string, string>): Promise<RunningChild> {
  const url = await freshDatabase(t)
  const dataDir = path.join(await makeTempDir(t, 'cluster-limits-'), 'data')
  const primary = await startChild(
    { dataDir, env: { DATABASE_URL: url, WORKERS: '2', ...env } },
    30_000,
  )
  t.after(() => primary.stop('SIGKILL'))
  const deadline = Date.now() + 20_000
  while (listeningPids(primary).size < 2) {
    assert.ok(Date.now() < deadline, primary.stdout())
    await sleep(50)
  }
  return primary
}

function listeningPids(primary: RunningChild): Set<string> {
  return new Set(
    [...primary.stdout().matchAll(/"msg":"listening".*?"pid":(\d+)/g)].map((m) => m[1] ?? ''),
  )
}

interface Opened {
  readonly req: ClientRequest
  readonly res: IncomingMessage
  /** The whole body of an answer that is not a stream. */
  readonly text: Promise<string>
  /** What has come of the body so far. */
  received(): string
}

/** One request on a connection of its own; resolves at its answer's head. */
function open(
  base: string,
  method: string,
  target: string,
  headers: Record<string, string>,
  body?: string,
  end = true,
): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${target}`, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      const text = new Promise<string>((done) => {
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => done(Buffer.concat(chunks).toString('utf8')))
        res.on('close', () => done(Buffer.concat(chunks).toString('utf8')))
      })
      resolve({ req, res, text, received: () => Buffer.concat(chunks).toString('utf8') })
    })
    req.on('error', reject)
    if (body !== undefined) req.write(body)
    if (end) req.end()
  })
}

const openStream = (base: string): Promise<Opened> =>
  open(base, 'GET', '/events', { authorization: `Bearer ${reader}`, accept: 'text/event-stream' })

async function assertOverloaded(opened: Opened): Promise<void> {
  assert.equal(opened.res.statusCode, 503)
  assert.equal(opened.res.headers['retry-after'], '5')
  assert.equal(opened.res.headers['content-type'], 'application/problem+json')
  const problem = JSON.parse(await opened.text) as { code: string; detail: string }
  assert.equal(problem.code, 'overloaded')
  assert.equal(problem.detail, 'At most 2 event streams may be open at once; try again later.')
}

async function snapshot(base: string): Promise<string[]> {
  const res = await request('GET', `${base}/users?limit=100`, { token: admin })
  assert.equal(res.status, 200, res.text)
  return res
    .json<UserPage>()
    .items.map((user: User) => user.email)
    .sort()
}

describe('service-wide limits with WORKERS=2', { skip: SKIP_POSTGRES }, () => {
  it('opens MAX_EVENT_STREAMS streams in all, whatever worker takes them, and frees a slot when one ends', {
    timeout: 90_000,
  }, async (t) => {
    const primary = await startWorkers(t, { MAX_EVENT_STREAMS: '2' })
    const streams: Opened[] = []
    t.after(() => {
      for (const stream of streams) stream.req.destroy()
    })
    // One after another, each on a connection of its own: the workers take them in turn.
    for (let i = 0; i < 8; i += 1) streams.push(await openStream(primary.url))
    const statuses = streams.map((stream) => stream.res.statusCode)
    assert.deepEqual(
      statuses.filter((status) => status === 200).length,
      2,
      `statuses: ${statuses.join(' ')}`,
    )
    for (const stream of streams.filter((s) => s.res.statusCode !== 200))
      await assertOverloaded(stream)
    for (const stream of streams.filter((s) => s.res.statusCode === 200))
      assert.equal(stream.res.headers['content-type'], 'text/event-stream; charset=utf-8')

    // One consumer leaves: its slot comes back to the service, and one more stream opens.
    streams.find((s) => s.res.statusCode === 200)?.req.destroy()
    const deadline = Date.now() + 10_000
    let reopened: Opened | undefined
    while (reopened === undefined) {
      assert.ok(Date.now() < deadline, 'no slot came back')
      const next = await openStream(primary.url)
      streams.push(next)
      if (next.res.statusCode === 200) reopened = next
      else await assertOverloaded(next)
    }
    // The limit holds again on either worker.
    for (let i = 0; i < 4; i += 1) {
      const more = await openStream(primary.url)
      streams.push(more)
      await assertOverloaded(more)
    }
  })

  it('gives back the stream slots of workers that die', { timeout: 90_000 }, async (t) => {
    const primary = await startWorkers(t, { MAX_EVENT_STREAMS: '2' })
    const streams: Opened[] = []
    t.after(() => {
      for (const stream of streams) stream.req.destroy()
    })
    for (let i = 0; i < 4; i += 1) streams.push(await openStream(primary.url))
    assert.equal(streams.filter((s) => s.res.statusCode === 200).length, 2)
    const pids = [...listeningPids(primary)]
    for (const pid of pids) process.kill(Number(pid), 'SIGKILL')
    // The primary starts two new workers; the dead ones' slots are free again.
    const deadline = Date.now() + 30_000
    while (listeningPids(primary).size < 4) {
      assert.ok(Date.now() < deadline, primary.stdout())
      await sleep(50)
    }
    // With PORT=0 the new workers share a new port once the old ones are all gone.
    const url = [...primary.stdout().matchAll(/"msg":"listening","url":"([^"]+)"/g)].at(-1)?.[1]
    assert.ok(url !== undefined)
    const again: Opened[] = []
    while (again.filter((s) => s.res.statusCode === 200).length < 2) {
      assert.ok(Date.now() < deadline, `statuses: ${again.map((s) => s.res.statusCode).join(' ')}`)
      const next = await openStream(url).catch(() => undefined)
      if (next !== undefined) again.push(next)
      else await sleep(50)
    }
    streams.push(...again)
    const more = await openStream(url)
    streams.push(more)
    await assertOverloaded(more)
  })

  it('runs one import at a time across the workers: every other is 409 import_in_progress and imports nothing', {
    timeout: 90_000,
  }, async (t) => {
    const primary = await startWorkers(t, {})
    const ndjson = {
      authorization: `Bearer ${admin}`,
      'content-type': 'application/x-ndjson',
    }
    const line = (tag: string): string =>
      `${JSON.stringify({ email: uniqueEmail(tag), name: 'Imported' })}\n`
    // The first import sends one line and holds its body open: it is running.
    const first = await open(primary.url, 'POST', '/users:import', ndjson, line('first'), false)
    t.after(() => first.req.destroy())
    assert.equal(first.res.statusCode, 200)
    const deadline = Date.now() + 10_000
    while (!first.received().includes('\n')) {
      assert.ok(Date.now() < deadline, 'the first line was never answered')
      await sleep(20)
    }
    const before = await snapshot(primary.url)
    assert.equal(before.length, 1)
    // Four more on connections of their own: the workers take them in turn.
    for (let i = 0; i < 4; i += 1) {
      const other = await open(primary.url, 'POST', '/users:import', ndjson, line('other'))
      assert.equal(other.res.statusCode, 409, `import ${i}`)
      assert.equal(other.res.headers['connection'], 'close')
      const problem = JSON.parse(await other.text) as { code: string }
      assert.equal(problem.code, 'import_in_progress')
    }
    assert.deepEqual(await snapshot(primary.url), before)
    first.req.end(line('first'))
    const results = (await first.text).split('\n').filter((text) => text !== '')
    assert.deepEqual(
      results.map((text) => (JSON.parse(text) as { status: number }).status),
      [201, 201],
    )
    // The lock is the service's again as soon as the answer has ended (the worker has the primary
    // free it before it ends the answer): the next imports run at once, on either worker.
    for (let i = 0; i < 2; i += 1) {
      const next = await open(primary.url, 'POST', '/users:import', ndjson, line('next'))
      assert.equal(next.res.statusCode, 200, await next.text)
      assert.match(await next.text, /^\{"line":1,"status":201,/)
    }
    assert.equal((await snapshot(primary.url)).length, 4)
  })
})

describe('createClusterSlots', () => {
  it('refuses to be made outside a cluster worker', () => {
    assert.throws(() => createClusterSlots(), /not a cluster worker/)
  })
})
