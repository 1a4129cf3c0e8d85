import assert from 'node:assert/strict'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { connect } from 'node:net'
import { describe, it } from 'node:test'

import { MemoryStore } from '../../src/store/memory-store.js'
import type { User } from '../../src/users/user.js'
import { assertProblem } from '../helpers/http.js'
import { startService, uniqueEmail, type TestService } from '../helpers/service.js'
import { makeUser, toContractJson } from '../helpers/store-users.js'
import { makeToken } from '../helpers/tokens.js'

interface Streamed {
  readonly status: number
  readonly headers: IncomingMessage['headers']
  readonly text: string
}

/** One request through node:http, the body written in the given pieces (chunked unless a length is set). */
export function streamRequest(
  app: TestService, method: string, path: string,
  options: { body?: readonly (string | Buffer)[], token?: string, headers?: Record<string, string> } = {},
): Promise<Streamed> {
  const url = new URL(`${app.baseUrl}${path}`)
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method,
      headers: { authorization: `Bearer ${options.token ?? app.token}`, 'content-type': 'application/x-ndjson', ...options.headers },
    }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }) })
      res.on('error', reject)
    })
    req.on('error', reject)
    for (const piece of options.body ?? []) req.write(piece)
    req.end()
  })
}

function lines(text: string): Record<string, unknown>[] {
  return text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as Record<string, unknown>)
}

async function listAll(app: TestService): Promise<User[]> {
  const users: User[] = []
  let cursor: string | null = null
  do {
    const res = await app.call('GET', `/users?limit=100${cursor === null ? '' : `&cursor=${cursor}`}`)
    assert.equal(res.status, 200)
    const page = res.json<{ items: User[], nextCursor: string | null }>()
    users.push(...page.items)
    cursor = page.nextCursor
  } while (cursor !== null)
  return users
}

function seeded(count: number, metadataBytes = 0): MemoryStore {
  const value = 'x'.repeat(Math.min(metadataBytes, 512))
  const metadata = metadataBytes === 0 ? {} : Object.fromEntries(Array.from({ length: Math.ceil(metadataBytes / 512) }, (_, i) => [`k${i}`, value]))
  return new MemoryStore(Array.from({ length: count }, (_, i) => makeUser({ metadata, status: i % 3 === 0 ? 'active' : 'pending' })))
}

describe('GET /users:export', () => {
  it('streams every user as NDJSON, equal to following the list to its end', async (t) => {
    const app = await startService(t, { store: seeded(1234) })
    await app.createUser({ metadata: { zeta: '1', alpha: '2' } })
    const res = await streamRequest(app, 'GET', '/users:export')
    assert.equal(res.status, 200)
    assert.equal(res.headers['content-type'], 'application/x-ndjson')
    assert.equal(res.headers['cache-control'], 'no-store')
    assert.ok(res.text.endsWith('\n'))
    const listed = await listAll(app)
    assert.equal(listed.length, 1235)
    assert.deepEqual(lines(res.text), listed)
    // Each line is the API's own JSON: metadata keys keep their order.
    assert.ok(res.text.includes('"metadata":{"zeta":"1","alpha":"2"}'))
  })

  it('answers an empty body for an empty store, and HEAD with the headers alone', async (t) => {
    const app = await startService(t)
    const res = await streamRequest(app, 'GET', '/users:export')
    assert.equal(res.status, 200)
    assert.equal(res.text, '')
    const head = await streamRequest(app, 'HEAD', '/users:export')
    assert.equal(head.status, 200)
    assert.equal(head.headers['content-type'], 'application/x-ndjson')
  })

  it('needs the users:admin scope', async (t) => {
    const app = await startService(t)
    assertProblem(await app.call('GET', '/users:export', { token: makeToken({ scope: 'users:read users:write' }) }), 403, 'insufficient_scope')
  })

  it('waits for a slow reader and still sends every user exactly once, with writes meanwhile', async (t) => {
    const store = seeded(3000, 1024)
    const app = await startService(t, { store })
    const before = await listAll(app)
    const doomed = before.slice(0, 50)
    const { hostname, port } = new URL(app.url)
    const socket = connect(Number(port), hostname)
    socket.write(`GET /users:export HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${app.token}\r\nconnection: close\r\n\r\n`)
    socket.pause()
    const chunks: Buffer[] = []
    // Read a little at a time, with writes in between, until the server closes.
    const ended = new Promise<void>((resolve) => socket.on('end', resolve))
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    let added: User[] = []
    for (let round = 0; round < 20; round += 1) {
      socket.resume()
      await new Promise((resolve) => setTimeout(resolve, 10))
      socket.pause()
      if (round === 5) {
        for (const user of doomed) assert.equal((await app.call('DELETE', `/users/${user.id}`)).status, 204)
        added = await Promise.all(Array.from({ length: 20 }, () => app.createUser()))
      }
    }
    socket.resume()
    await ended
    const text = Buffer.concat(chunks).toString('utf8')
    const body = text.slice(text.indexOf('\r\n\r\n') + 4)
    assert.match(text, /^HTTP\/1.1 200/)
    // Chunked framing: keep only the lines that are users.
    const ids = body.split('\n').filter((line) => line.startsWith('{')).map((line) => (JSON.parse(line) as User).id)
    assert.equal(new Set(ids).size, ids.length, 'no user twice')
    const seen = new Set(ids)
    for (const user of before.slice(50)) assert.ok(seen.has(user.id), `user ${user.id} existed throughout`)
    for (const id of ids) assert.ok(before.some((user) => user.id === id) || added.some((user) => user.id === id))
  })

  it('drops a client that stopped reading once the stall time-out passes, and keeps serving others', async (t) => {
    const app = await startService(t, { store: seeded(4000, 2048), exportStallTimeoutMs: 300 })
    const { hostname, port } = new URL(app.url)
    const socket = connect(Number(port), hostname)
    socket.write(`GET /users:export HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${app.token}\r\n\r\n`)
    socket.pause()
    socket.on('error', () => undefined)
    // The service answers others meanwhile.
    assert.equal((await app.call('GET', '/users?limit=1')).status, 200)
    // The request is logged when the service lets go of it: the only clock here.
    while (!app.logs.some((entry) => entry['path'] === '/users:export')) await new Promise((resolve) => setTimeout(resolve, 50))
    const entry = app.logs.find((line) => line['path'] === '/users:export')
    assert.equal(entry?.['status'], 499)
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    await new Promise<void>((resolve) => { socket.on('close', () => { resolve() }); socket.resume() })
    const text = Buffer.concat(chunks).toString('utf8')
    const users = text.split('\n').filter((line) => line.startsWith('{"id"')).length
    assert.ok(users < 4000, `the export was cut short (${users} users sent)`)
    assert.ok(!text.endsWith('0\r\n\r\n'), 'no last chunk: the client can tell the export is incomplete')
    assert.equal((await app.call('GET', '/users?limit=1')).status, 200)
  })
})
