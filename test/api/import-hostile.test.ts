// npm test: alone (it bounds wall-clock times, which another file run beside it would stretch).
import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import { connect, type Socket } from 'node:net'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { type RunningChild, sleep, startChild } from '../helpers/child.js'
import { assertProblem, request, type TestResponse, type UserPage } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { freshDatabase, SKIP_POSTGRES } from '../helpers/postgres.js'
import { readCpuSeconds, sampleRss } from '../helpers/proc-stats.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()
const NDJSON = 'application/x-ndjson'
const MiB = 1024 * 1024
/**
 * The contract's goal is 512 MB whatever a client does; a service that holds what it should (about
 * 16 MiB of body read ahead, about 1 MiB of results) stays far below this, and one that queues a
 * result per line passes it within seconds.
 */
const RSS_LIMIT_MB = 200

/** The store a child service runs on, as environment variables. */
interface StoreKind {
  readonly name: string
  readonly skip: string | false
  env(t: TestContext): Promise<Record<string, string>>
}

const STORES: readonly StoreKind[] = [
  { name: 'file store', skip: false, env: () => Promise.resolve({}) },
  {
    name: 'PostgreSQL',
    skip: SKIP_POSTGRES,
    env: async (t) => ({ DATABASE_URL: await freshDatabase(t) }),
  },
]

async function startOn(
  t: TestContext,
  dataDir: string,
  env: Record<string, string>,
): Promise<RunningChild & { pid: number }> {
  const child = await startChild({ dataDir, env })
  t.after(() => child.stop('SIGKILL'))
  const pid = child.proc.pid
  if (pid === undefined) throw new Error('the child has no pid')
  return Object.assign(child, { pid })
}

function importBody(url: string, body: string): Promise<TestResponse> {
  return request('POST', `${url}/users:import`, { token, body, contentType: NDJSON })
}

function resultsOf(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

async function listUsers(url: string): Promise<User[]> {
  const res = await request('GET', `${url}/users?limit=100`, { token })
  assert.equal(res.status, 200, res.text)
  return res.json<UserPage>().items
}

/** Milliseconds /healthz takes to answer 200. */
async function healthLatencyMs(url: string): Promise<number> {
  const started = performance.now()
  const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(10_000) })
  await res.text()
  assert.equal(res.status, 200)
  return performance.now() - started
}

/** Sends an import's head and whole body on a raw connection whose answer is never read. */
function sendUnreadImport(url: string, body: Buffer): Socket {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port), hostname)
  socket.on('error', () => undefined)
  socket.pause()
  socket.write(
    `POST /users:import HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-type: ${NDJSON}\r\ncontent-length: ${body.length}\r\n\r\n`,
  )
  socket.write(body)
  return socket
}

for (const kind of STORES) {
  describe(`an import against the service (${kind.name})`, { skip: kind.skip }, () => {
    it('holds little for an import whose answer is never read, keeps /healthz answering, and stops within a second of the client leaving', {
      timeout: 60_000,
    }, async (t) => {
      const child = await startOn(t, path.join(await makeTempDir(t), 'data'), await kind.env(t))
      const rss = sampleRss(child.pid)
      // 8 MiB of lines that are not JSON: each is refused at once, with a result line of its own.
      const socket = sendUnreadImport(child.url, Buffer.alloc(8 * MiB, 'x\n'))
      t.after(() => {
        socket.destroy()
      })
      await waitFor(
        'the import to be under way',
        async () => {
          const res = await importBody(child.url, '{}')
          return res.status === 409 ? true : undefined
        },
        10_000,
      )
      let slowestMs = 0
      for (const until = Date.now() + 6000; Date.now() < until; ) {
        slowestMs = Math.max(slowestMs, await healthLatencyMs(child.url))
        await sleep(150)
      }
      const maxRss = rss.stop()
      t.diagnostic(
        `slowest /healthz ${Math.round(slowestMs)} ms, largest RSS ${Math.round(maxRss)} MB`,
      )
      assert.ok(
        slowestMs < 1000,
        `/healthz took ${Math.round(slowestMs)} ms to answer during the import`,
      )
      assert.ok(maxRss < RSS_LIMIT_MB, `RSS reached ${Math.round(maxRss)} MB for one unread import`)
      // The unread import is still the one running: it was paused, not finished in memory.
      assertProblem(await importBody(child.url, '{}'), 409, 'import_in_progress')

      socket.destroy()
      const left = performance.now()
      let next: TestResponse
      do
        next = await importBody(
          child.url,
          JSON.stringify({ email: uniqueEmail('next'), name: 'Next Import' }),
        )
      while (next.status === 409 && performance.now() - left < 10_000)
      const freedMs = performance.now() - left
      assert.equal(next.status, 200, next.text)
      assert.deepEqual(
        resultsOf(next.text).map((result) => result['status']),
        [201],
      )
      assert.ok(
        freedMs < 1000,
        `the next import waited ${Math.round(freedMs)} ms after the client left`,
      )
      const cpuBefore = readCpuSeconds(child.pid)
      await sleep(1000)
      const busy = readCpuSeconds(child.pid) - cpuBefore
      t.diagnostic(
        `the next import waited ${Math.round(freedMs)} ms; ${busy} s of CPU in the second after`,
      )
      assert.ok(busy < 0.3, `the service used ${busy} s of CPU in the second after the client left`)
      // None of the refused lines left anything behind.
      assert.deepEqual(
        (await listUsers(child.url)).map((user) => user.name),
        ['Next Import'],
      )
    })

    it('stops on SIGTERM during a 30,000-line import with exit 0, and every result it sent is true after a restart', {
      timeout: 90_000,
    }, async (t) => {
      const dataDir = path.join(await makeTempDir(t), 'data')
      const env = await kind.env(t)
      const child = await startOn(t, dataDir, env)
      const lines = Array.from(
        { length: 30_000 },
        (_, i) =>
          `${JSON.stringify({ email: `sigterm.${i}.${uniqueEmail()}`, name: `Line ${i + 1}` })}\n`,
      )
      let text = ''
      let signalled = false
      const answered = new Promise<void>((resolve) => {
        const req = httpRequest(
          `${child.url}/users:import`,
          { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': NDJSON } },
          (res) => {
            res.setEncoding('utf8')
            res.on('data', (chunk: string) => {
              text += chunk
              if (!signalled && text.split('\n').length > 1000) {
                signalled = true
                child.proc.kill('SIGTERM')
              }
            })
            res.on('end', resolve)
            res.on('error', () => {
              resolve()
            })
            res.on('close', resolve)
          },
        )
        req.on('error', () => {
          resolve()
        })
        req.end(lines.join(''))
      })
      await answered
      const exit = await child.exited
      t.diagnostic(`${text.split('\n').length - 1} results before the exit`)
      assert.ok(signalled, 'SIGTERM was sent during the import')
      assert.deepEqual(exit, { code: 0, signal: null }, child.stderr())
      // Only whole result lines count: a cut connection may end inside one.
      const results = text
        .split('\n')
        .slice(0, -1)
        .map((line) => JSON.parse(line) as { line: number; status: number; id: string })
      assert.ok(results.length >= 1000)
      assert.deepEqual(
        results.map((result) => result.line),
        results.map((_, i) => i + 1),
        'one result per line, in input order',
      )
      assert.ok(
        results.every((result) => result.status === 201),
        'every line sent was stored',
      )
      const restarted = await startOn(t, dataDir, env)
      for (const result of results.filter((_, i) => i % 97 === 0 || i === results.length - 1)) {
        const res = await request('GET', `${restarted.url}/users/${result.id}`, { token })
        assert.equal(
          res.status,
          200,
          `line ${result.line} was answered 201 and is missing after the restart`,
        )
        assert.equal(res.json<User>().name, `Line ${result.line}`)
      }
      const exported = await fetch(`${restarted.url}/users:export`, {
        headers: { authorization: `Bearer ${token}` },
      })
      assert.equal(exported.status, 200)
      const stored = new Set(
        (await exported.text())
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => (JSON.parse(line) as User).id),
      )
      assert.ok(
        results.every((result) => stored.has(result.id)),
        'every user answered 201 is stored',
      )
    })
  })
}

describe('an import line of 200 MiB', () => {
  it('is answered 413 with low RSS, and the next line is imported', {
    timeout: 60_000,
  }, async (t) => {
    const child = await startOn(t, path.join(await makeTempDir(t), 'data'), {})
    const rss = sampleRss(child.pid)
    const after = JSON.stringify({ email: uniqueEmail('after'), name: 'After The Long Line' })
    const piece = Buffer.alloc(MiB, 'a')
    const pieces = 200
    const tail = Buffer.from(`\n${after}\n`)
    const text = await new Promise<string>((resolve, reject) => {
      const req = httpRequest(
        `${child.url}/users:import`,
        {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': NDJSON,
            'content-length': pieces * MiB + tail.length,
          },
        },
        (res) => {
          let body = ''
          res.setEncoding('utf8')
          res.on('data', (chunk: string) => {
            body += chunk
          })
          res.on('end', () => {
            resolve(body)
          })
        },
      )
      req.on('error', reject)
      let sent = 0
      const write = (): void => {
        while (sent < pieces) {
          sent += 1
          if (!req.write(piece)) {
            req.once('drain', write)
            return
          }
        }
        req.end(tail)
      }
      write()
    })
    const maxRss = rss.stop()
    t.diagnostic(`largest RSS ${Math.round(maxRss)} MB`)
    assert.deepEqual(
      resultsOf(text).map((result) => [result['line'], result['status'], result['code']]),
      [
        [1, 413, 'payload_too_large'],
        [2, 201, undefined],
      ],
    )
    // Held whole, the line alone would take 200 MiB; Node 26 idles higher than Node 20 (163 MB seen).
    assert.ok(maxRss < 200, `RSS reached ${Math.round(maxRss)} MB for a 200 MiB line`)
    assert.deepEqual(
      (await listUsers(child.url)).map((user) => user.name),
      ['After The Long Line'],
    )
  })
})
