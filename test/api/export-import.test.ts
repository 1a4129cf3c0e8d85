import assert from 'node:assert/strict'
import { once } from 'node:events'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { connect, type Socket } from 'node:net'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import type { UserServiceOptions } from '../../src/process/create-user-service.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import { assertProblem } from '../helpers/http.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../helpers/postgres.js'
import { exchange, openSocket } from '../helpers/raw-exchange.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'
import { makeUser, toContractJson } from '../helpers/store-users.js'
import { makeToken } from '../helpers/tokens.js'

interface Streamed {
  readonly status: number
  readonly headers: IncomingMessage['headers']
  readonly text: string
}

/** One request through node:http, the body written in the given pieces (chunked unless a length is set). */
export function streamRequest(
  app: Pick<TestService, 'baseUrl' | 'token'>,
  method: string,
  path: string,
  options: {
    body?: readonly (string | Buffer)[]
    token?: string
    headers?: Record<string, string>
  } = {},
): Promise<Streamed> {
  const url = new URL(`${app.baseUrl}${path}`)
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method,
        headers: {
          authorization: `Bearer ${options.token ?? app.token}`,
          'content-type': 'application/x-ndjson',
          ...options.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          })
        })
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    for (const piece of options.body ?? []) req.write(piece)
    req.end()
  })
}

function lines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

/** The body of a whole chunked response (throws on a cut one: the final 0-size chunk must be there). */
function decodeChunked(text: string): string {
  let rest = text
  let body = ''
  for (;;) {
    const end = rest.indexOf('\r\n')
    assert.notEqual(end, -1, `a cut chunked body: ${JSON.stringify(text)}`)
    const size = Number.parseInt(rest.slice(0, end), 16)
    if (size === 0) return body
    body += rest.slice(end + 2, end + 2 + size)
    rest = rest.slice(end + 2 + size + 2)
  }
}

/** The one answer on a raw import connection: its head and its result lines. */
function oneImportAnswer(raw: string): {
  headers: ReadonlyMap<string, string>
  results: Record<string, unknown>[]
} {
  assert.equal(
    raw.split('HTTP/1.1 ').length - 1,
    1,
    `one response on the connection, not an answer to a request after the body: ${JSON.stringify(raw)}`,
  )
  const end = raw.indexOf('\r\n\r\n')
  assert.notEqual(end, -1, `a cut head: ${JSON.stringify(raw)}`)
  const [statusLine = '', ...fields] = raw.slice(0, end).split('\r\n')
  assert.equal(statusLine, 'HTTP/1.1 200 OK', raw)
  const headers = new Map<string, string>()
  for (const field of fields) {
    const colon = field.indexOf(':')
    headers.set(field.slice(0, colon).trim().toLowerCase(), field.slice(colon + 1).trim())
  }
  return { headers, results: lines(decodeChunked(raw.slice(end + 4))) }
}

async function listAll(app: TestService): Promise<User[]> {
  const users: User[] = []
  let cursor: string | null = null
  do {
    const res = await app.call(
      'GET',
      `/users?limit=100${cursor === null ? '' : `&cursor=${cursor}`}`,
    )
    assert.equal(res.status, 200)
    const page = res.json<{ items: User[]; nextCursor: string | null }>()
    users.push(...page.items)
    cursor = page.nextCursor
  } while (cursor !== null)
  return users
}

function seeded(count: number, metadataBytes = 0): MemoryStore {
  const value = 'x'.repeat(Math.min(metadataBytes, 512))
  const metadata =
    metadataBytes === 0
      ? {}
      : Object.fromEntries(
          Array.from({ length: Math.ceil(metadataBytes / 512) }, (_, i) => [`k${i}`, value]),
        )
  return new MemoryStore(
    Array.from({ length: count }, (_, i) =>
      makeUser({ metadata, status: i % 3 === 0 ? 'active' : 'pending' }),
    ),
  )
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
    assertProblem(
      await app.call('GET', '/users:export', {
        token: makeToken({ scope: 'users:read users:write' }),
      }),
      403,
      'insufficient_scope',
    )
  })

  it('waits for a slow reader and still sends every user exactly once, with writes meanwhile', async (t) => {
    const store = seeded(3000, 1024)
    const app = await startService(t, { store })
    const before = await listAll(app)
    const doomed = before.slice(0, 50)
    const { hostname, port } = new URL(app.url)
    const socket = connect(Number(port), hostname)
    socket.write(
      `GET /users:export HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${app.token}\r\nconnection: close\r\n\r\n`,
    )
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
        for (const user of doomed)
          assert.equal((await app.call('DELETE', `/users/${user.id}`)).status, 204)
        added = await Promise.all(Array.from({ length: 20 }, () => app.createUser()))
      }
    }
    socket.resume()
    await ended
    const text = Buffer.concat(chunks).toString('utf8')
    const body = text.slice(text.indexOf('\r\n\r\n') + 4)
    assert.match(text, /^HTTP\/1.1 200/)
    // Chunked framing: keep only the lines that are users.
    const ids = body
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => (JSON.parse(line) as User).id)
    assert.equal(new Set(ids).size, ids.length, 'no user twice')
    const seen = new Set(ids)
    for (const user of before.slice(50))
      assert.ok(seen.has(user.id), `user ${user.id} existed throughout`)
    for (const id of ids)
      assert.ok(before.some((user) => user.id === id) || added.some((user) => user.id === id))
  })

  it('drops a client that stopped reading once the stall time-out passes, and keeps serving others', async (t) => {
    const app = await startService(t, { store: seeded(4000, 2048), exportStallTimeoutMs: 300 })
    const { hostname, port } = new URL(app.url)
    const socket = connect(Number(port), hostname)
    socket.write(
      `GET /users:export HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${app.token}\r\n\r\n`,
    )
    socket.pause()
    socket.on('error', () => undefined)
    // The service answers others meanwhile.
    assert.equal((await app.call('GET', '/users?limit=1')).status, 200)
    // The request is logged when the service lets go of it: the only clock here.
    while (!app.logs.some((entry) => entry['path'] === '/users:export'))
      await new Promise((resolve) => setTimeout(resolve, 50))
    const entry = app.logs.find((line) => line['path'] === '/users:export')
    assert.equal(entry?.['status'], 499)
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    await new Promise<void>((resolve) => {
      socket.on('close', () => {
        resolve()
      })
      socket.resume()
    })
    const text = Buffer.concat(chunks).toString('utf8')
    const users = text.split('\n').filter((line) => line.startsWith('{"id"')).length
    assert.ok(users < 4000, `the export was cut short (${users} users sent)`)
    assert.ok(
      !text.endsWith('0\r\n\r\n'),
      'no last chunk: the client can tell the export is incomplete',
    )
    assert.equal((await app.call('GET', '/users?limit=1')).status, 200)
  })
})

const NDJSON = { 'content-type': 'application/x-ndjson' }
/** An import line's limit (docs/bulk.md), written out so that the test holds the code to it. */
const LINE_LIMIT = 128 * 1024

function exportedLine(user: User): string {
  return toContractJson(user)
}

/** A service on one kind of store, and the same store's data in a new service (a restart). */
interface StoreUnderTest {
  readonly name: string
  readonly skip: string | false
  start(t: TestContext, options?: Partial<UserServiceOptions>): Promise<TestService>
  restart(t: TestContext, app: TestService): Promise<TestService>
}

const schemas = new WeakMap<TestService, string>()
const onPostgres = (
  t: TestContext,
  schema: string,
  options: Partial<UserServiceOptions> = {},
): Promise<TestService> =>
  startService(t, { store: new PostgresStore({ url: requireDatabaseUrl(), schema }), ...options })

function describeImport(on: StoreUnderTest): void {
  describe(`POST /users:import (${on.name})`, { skip: on.skip }, () => {
    it('answers one result per line in input order, keeping exported users as they were', async (t) => {
      const app = await on.start(t)
      const taken = await app.createUser()
      const kept = makeUser({
        status: 'suspended',
        version: 7,
        metadata: { zeta: '1', alpha: '2' },
        updatedAt: new Date(Date.now() + 1000).toISOString(),
      })
      const input = [
        exportedLine(kept),
        JSON.stringify({ email: uniqueEmail('new'), name: 'New One', metadata: { team: 'a' } }),
        '{"email": not json',
        JSON.stringify({ email: 'no-at-sign', name: 'Bad' }),
        JSON.stringify({ email: taken.email.toUpperCase(), name: 'Same Email' }),
        '',
        JSON.stringify({
          ...(JSON.parse(exportedLine(makeUser())) as object),
          status: 'gone',
          version: 0,
        }),
        JSON.stringify({ email: uniqueEmail(), name: 'Read only', status: 'active' }),
      ]
      const res = await streamRequest(app, 'POST', '/users:import', {
        body: [`${input.join('\n')}\n`],
      })
      assert.equal(res.status, 200)
      assert.equal(res.headers['content-type'], 'application/x-ndjson')
      const results = lines(res.text)
      assert.deepEqual(
        results.map((result) => [result['line'], result['status']]),
        [
          [1, 201],
          [2, 201],
          [3, 400],
          [4, 422],
          [5, 409],
          [7, 422],
          [8, 422],
        ],
      )
      assert.equal(results[0]?.['id'], kept.id)
      assert.equal(results[4]?.['code'], 'duplicate_email')
      assert.deepEqual(
        (results[5]?.['errors'] as { pointer: string }[] | undefined)?.map(
          (error) => error.pointer,
        ),
        ['/status', '/version'],
      )
      assert.deepEqual(
        (results[6]?.['errors'] as { pointer: string }[] | undefined)?.map(
          (error) => error.pointer,
        ),
        ['/status'],
      )
      // The exported user is stored exactly as it was: id, status, time stamps, version, metadata order.
      const stored = await app.call('GET', `/users/${kept.id}`)
      assert.equal(stored.text, exportedLine(kept))
      assert.equal(stored.headers.get('etag'), '"v7"')
      const created = await app.getUser(String(results[1]?.['id']))
      assert.equal(created.status, 'pending')
      assert.equal(created.version, 1)
      assert.deepEqual(created.metadata, { team: 'a' })
      assert.equal((await app.snapshot()).length, 3)
    })

    it('answers 200 and changes nothing when a re-run finds the same user, 409 when the id holds another', async (t) => {
      const app = await on.start(t)
      const user = makeUser({ status: 'active', version: 3 })
      const first = await streamRequest(app, 'POST', '/users:import', {
        body: [`${exportedLine(user)}\n${exportedLine(user)}\n`],
      })
      assert.deepEqual(
        lines(first.text).map((result) => result['status']),
        [201, 200],
      )
      const again = await streamRequest(app, 'POST', '/users:import', {
        body: [exportedLine(user)],
      })
      assert.deepEqual(lines(again.text), [{ line: 1, status: 200, id: user.id }])
      const other = await streamRequest(app, 'POST', '/users:import', {
        body: [exportedLine({ ...user, name: 'Someone Else' })],
      })
      assert.equal(lines(other.text)[0]?.['status'], 409)
      assert.equal(lines(other.text)[0]?.['code'], 'duplicate_id')
      assert.equal((await app.call('GET', `/users/${user.id}`)).text, exportedLine(user))
      assert.equal((await app.call('DELETE', `/users/${user.id}`)).status, 204)
      const deleted = await streamRequest(app, 'POST', '/users:import', {
        body: [exportedLine(user)],
      })
      assert.equal(lines(deleted.text)[0]?.['code'], 'duplicate_id')
      assert.deepEqual(await app.snapshot(), [])
    })

    it('gives a line over 128 KiB and a line that is not UTF-8 their own results, and goes on', async (t) => {
      const app = await on.start(t)
      const long = JSON.stringify({ email: uniqueEmail(), name: 'x'.repeat(140_000) })
      const after = uniqueEmail('after')
      const body = [
        // The long line arrives in pieces, as a stream would bring it.
        long.slice(0, 60_000),
        long.slice(60_000),
        '\n',
        Buffer.from([0xff, 0xfe, 0x0a]),
        `${JSON.stringify({ email: after, name: 'After' })}`,
      ]
      const res = await streamRequest(app, 'POST', '/users:import', { body })
      const results = lines(res.text)
      assert.deepEqual(
        results.map((result) => [result['line'], result['status'], result['code']]),
        [
          [1, 413, 'payload_too_large'],
          [2, 400, 'bad_request'],
          [3, 201, undefined],
        ],
      )
      const users = await app.snapshot()
      assert.deepEqual(
        users.map((user) => user.email),
        [after],
      )
    })

    it('takes a line of exactly 128 KiB ended by CRLF as it takes one ended by LF', async (t) => {
      const app = await on.start(t)
      const lf = lineOfBytes(LINE_LIMIT)
      const crlf = lineOfBytes(LINE_LIMIT)
      const over = lineOfBytes(LINE_LIMIT + 1)
      const res = await streamRequest(app, 'POST', '/users:import', {
        // The CR of a CRLF is the line's end, not its content: it counts toward no limit.
        body: [`${lf}\n`, `${crlf}\r\n`, `${over}\r\n`, `${crlf.replace('edge', 'more')}\r\r\n`],
      })
      assert.deepEqual(
        lines(res.text).map((result) => [result['line'], result['status'], result['code']]),
        [
          [1, 201, undefined],
          [2, 201, undefined],
          [3, 413, 'payload_too_large'],
          [4, 413, 'payload_too_large'],
        ],
      )
      assert.equal((await app.snapshot()).length, 2)
    })

    it('moves the largest user the rules allow, built by PATCHes, through export and import', async (t) => {
      const from = await on.start(t)
      const into = await on.start(t)
      const user = await from.createUser({ name: '\u{1F600}'.repeat(200) })
      // 32 values of 512 code points that JSON writes in 6 bytes each: about 100 KB exported,
      // past 64 KiB, and sent in PATCHes that each stay under the body limit.
      const value = '\u0001'.repeat(512)
      for (let first = 0; first < 32; first += 8) {
        const metadata: Record<string, string> = {}
        for (let key = first; key < first + 8; key += 1) metadata[`k${key}`.padEnd(64, '-')] = value
        const res = await from.call('PATCH', `/users/${user.id}`, { json: { metadata } })
        assert.equal(res.status, 200, res.text)
      }
      const exported = await streamRequest(from, 'GET', '/users:export')
      const line = exported.text.split('\n').find((text) => text.includes(user.id)) ?? ''
      assert.ok(Buffer.byteLength(line) > 100_000, `an exported line of ${line.length} characters`)
      const res = await streamRequest(into, 'POST', '/users:import', { body: [`${line}\n`] })
      assert.deepEqual(lines(res.text), [{ line: 1, status: 201, id: user.id }])
      assert.deepEqual(await into.getUser(user.id), await from.getUser(user.id))
    })

    it('refuses a line that names a member twice in one object with its own 400, and goes on', async (t) => {
      const app = await on.start(t)
      const kept = makeUser()
      const twice = `{"email":"${uniqueEmail()}","name":"Twice","name":"Again"}`
      const exported = exportedLine(kept).replace('{"id"', `{"id":"${kept.id}","id"`)
      const res = await streamRequest(app, 'POST', '/users:import', {
        body: [`${twice}\n`, `${exported}\n`, `${exportedLine(kept)}\n`],
      })
      const results = lines(res.text)
      assert.deepEqual(
        results.map((result) => [result['line'], result['status'], result['code']]),
        [
          [1, 400, 'bad_request'],
          [2, 400, 'bad_request'],
          [3, 201, undefined],
        ],
      )
      assert.match(String(results[0]?.['detail']), /"name" twice in one object/)
      assert.match(String(results[1]?.['detail']), /"id" twice in one object/)
      assert.deepEqual(await app.snapshot(), [kept])
    })

    it('imports many lines with creates in parallel and sends results in input order, all durable after a restart', async (t) => {
      const app = await on.start(t)
      const users = Array.from({ length: 300 }, () => makeUser())
      const res = await streamRequest(app, 'POST', '/users:import', {
        body: users.map((user) => `${exportedLine(user)}\n`),
      })
      const results = lines(res.text)
      assert.deepEqual(
        results.map((result) => result['line']),
        users.map((_, i) => i + 1),
      )
      assert.ok(results.every((result) => result['status'] === 201))
      await app.service.close()
      const reopened = await on.restart(t, app)
      assert.deepEqual(
        (await reopened.snapshot()).map((user) => user.id),
        users.map((user) => user.id).sort(),
      )
    })

    it('stores lines that name one id or one email in input order, though they run at once', async (t) => {
      const app = await on.start(t)
      // 40 pairs, each two lines running at once: an exported user twice (201, then 200), and two
      // new users whose emails differ only in case (201, then 409 duplicate_email).
      const twice = Array.from({ length: 20 }, () => makeUser())
      const shared = Array.from({ length: 20 }, () => uniqueEmail())
      const body = [
        ...twice.flatMap((user) => [exportedLine(user), exportedLine(user)]),
        ...shared.flatMap((email) => [
          JSON.stringify({ email, name: 'First' }),
          JSON.stringify({ email: email.toUpperCase(), name: 'Second' }),
        ]),
      ].map((line) => `${line}\n`)
      const results = lines((await streamRequest(app, 'POST', '/users:import', { body })).text)
      assert.deepEqual(
        results.map((result) => [result['status'], result['code']]),
        [
          ...twice.flatMap(() => [
            [201, undefined],
            [200, undefined],
          ]),
          ...shared.flatMap(() => [
            [201, undefined],
            [409, 'duplicate_email'],
          ]),
        ],
      )
      const stored = await app.snapshot()
      assert.equal(stored.length, 40)
      for (const email of shared)
        assert.equal(stored.find((user) => user.email === email)?.name, 'First')
    })

    it('answers 409 import_in_progress while another import runs, then takes the next one', async (t) => {
      const app = await on.start(t)
      const url = new URL(`${app.baseUrl}/users:import`)
      const first = httpRequest(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${app.token}`, ...NDJSON },
      })
      let sawResult: () => void = () => undefined
      const firstResult = new Promise<void>((resolve) => {
        sawResult = resolve
      })
      const firstDone = new Promise<Streamed>((resolve, reject) => {
        first.on('response', (res) => {
          const chunks: Buffer[] = []
          res.on('data', (chunk: Buffer) => {
            chunks.push(chunk)
            sawResult()
          })
          res.on('end', () => {
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              text: Buffer.concat(chunks).toString('utf8'),
            })
          })
        })
        first.on('error', reject)
      })
      first.write(`${JSON.stringify({ email: uniqueEmail(), name: 'First' })}\n`)
      first.flushHeaders()
      // The first result line says the first import is under way.
      await firstResult
      const second = await streamRequest(app, 'POST', '/users:import', {
        body: [JSON.stringify({ email: uniqueEmail(), name: 'Second' })],
      })
      assert.equal(second.status, 409)
      assert.equal(JSON.parse(second.text).code, 'import_in_progress')
      first.end(`${JSON.stringify({ email: uniqueEmail(), name: 'Third' })}\n`)
      assert.deepEqual(
        lines((await firstDone).text).map((result) => result['status']),
        [201, 201],
      )
      const next = await streamRequest(app, 'POST', '/users:import', {
        body: [JSON.stringify({ email: uniqueEmail(), name: 'Fourth' })],
      })
      assert.equal(lines(next.text)[0]?.['status'], 201)
      assert.deepEqual((await app.snapshot()).map((user) => user.name).sort(), [
        'First',
        'Fourth',
        'Third',
      ])
    })

    it('refuses a body announced over IMPORT_MAX_BYTES with 413, and stops a chunked one at the limit', async (t) => {
      const app = await on.start(t, { importMaxBytes: 2000 })
      const line = `${JSON.stringify({ email: uniqueEmail(), name: 'Big' })}\n`
      const announced = await app.call('POST', '/users:import', {
        body: line.repeat(40),
        contentType: 'application/x-ndjson',
      })
      assertProblem(announced, 413, 'payload_too_large')
      assert.deepEqual(await app.snapshot(), [])
      // A query parameter the import does not take is a 400, but the size is judged first.
      const withQuery = await app.call('POST', '/users:import?dryRun=1', {
        body: line.repeat(40),
        contentType: 'application/x-ndjson',
      })
      assertProblem(withQuery, 413, 'payload_too_large')
      assert.deepEqual(await app.snapshot(), [])
      // Over a raw socket, so that a reset while the client still writes the body cannot lose the
      // answer: every byte that came back is kept, and the checks below always run.
      const sent = Array.from(
        { length: 40 },
        (_, i) =>
          `${JSON.stringify({ email: `chunked.${i}.${uniqueEmail()}`, name: 'Chunked' })}\n`,
      )
      const { host } = new URL(app.url)
      const head =
        `POST /users:import HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${app.token}\r\n` +
        'content-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n'
      const body = sent
        .map((piece) => `${Buffer.byteLength(piece).toString(16)}\r\n${piece}\r\n`)
        .join('')
      const answer = await exchange(app.baseUrl, `${head}${body}0\r\n\r\n`, { waitMs: 5000 })
      assert.equal(answer.closed, true, 'the server closes the connection after its answer')
      const [statusLine = '', ...rest] = answer.raw.split('\r\n')
      assert.equal(statusLine, 'HTTP/1.1 200 OK', answer.raw)
      const results = lines(decodeChunked(rest.slice(rest.indexOf('') + 1).join('\r\n')))
      // The lines before the limit are imported in order, then one 413 names the line it stopped at.
      const imported = results.slice(0, -1)
      // Each line is a chunk of its own, so the limit falls in line imported.length + 1, not before.
      const bytesOf = (count: number): number => Buffer.byteLength(sent.slice(0, count).join(''))
      assert.ok(
        bytesOf(imported.length) <= 2000 && bytesOf(imported.length + 1) > 2000,
        `stopped after ${imported.length} lines`,
      )
      assert.deepEqual(
        imported.map((result) => [result['line'], result['status']]),
        imported.map((_, i) => [i + 1, 201]),
      )
      assert.deepEqual(
        [results.at(-1)?.['line'], results.at(-1)?.['status'], results.at(-1)?.['code']],
        [imported.length + 1, 413, 'payload_too_large'],
      )
      const stored = (await app.snapshot()).map((user) => user.email).sort()
      assert.deepEqual(
        stored,
        sent
          .slice(0, imported.length)
          .map((piece) => (JSON.parse(piece) as { email: string }).email)
          .sort(),
      )
    })

    it('imports the lines before IMPORT_MAX_BYTES also when one chunk carries the limit and more', async (t) => {
      const app = await on.start(t, { importMaxBytes: 2000 })
      const sent = Array.from(
        { length: 40 },
        (_, i) => `${JSON.stringify({ email: `onechunk.${i}.${uniqueEmail()}`, name: 'One' })}\n`,
      )
      const { host } = new URL(app.url)
      const whole = sent.join('')
      const head =
        `POST /users:import HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${app.token}\r\n` +
        'content-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n'
      const body = `${Buffer.byteLength(whole).toString(16)}\r\n${whole}\r\n0\r\n\r\n`
      const answer = await exchange(app.baseUrl, `${head}${body}`, { waitMs: 5000 })
      const [statusLine = '', ...rest] = answer.raw.split('\r\n')
      assert.equal(statusLine, 'HTTP/1.1 200 OK', answer.raw)
      const results = lines(decodeChunked(rest.slice(rest.indexOf('') + 1).join('\r\n')))
      // Every line that ends within the 2,000 bytes is imported; the one the limit cuts is not.
      let fit = 0
      while (Buffer.byteLength(sent.slice(0, fit + 1).join('')) <= 2000) fit += 1
      assert.ok(fit > 0 && fit < sent.length)
      assert.deepEqual(
        results.map((result) => [result['line'], result['status']]),
        [...Array.from({ length: fit }, (_, i) => [i + 1, 201]), [fit + 1, 413]],
      )
      const stored = (await app.snapshot()).map((user) => user.email).sort()
      const expected = sent
        .slice(0, fit)
        .map((piece) => (JSON.parse(piece) as { email: string }).email)
      assert.deepEqual(stored, expected.sort())
    })

    it('reads no more of a chunked body past IMPORT_MAX_BYTES on a keep-alive connection, and answers nothing more on it', async (t) => {
      const app = await on.start(t, { importMaxBytes: 2000 })
      const { host } = new URL(app.url)
      const head =
        `POST /users:import HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${app.token}\r\n` +
        'content-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n'
      const line = `${JSON.stringify({ email: uniqueEmail(), name: 'Kept Alive' })}\n`
      const filler = `ffff\r\n${'x'.repeat(0xffff)}\r\n`.repeat(32)
      const next = `GET /healthz HTTP/1.1\r\nhost: ${host}\r\n\r\n`
      const answer = await exchange(
        app.baseUrl,
        `${head}${Buffer.byteLength(line).toString(16)}\r\n${line}\r\n${filler}0\r\n\r\n${next}`,
        { waitMs: 3000 },
      )
      assert.equal(
        answer.raw.split('HTTP/1.1 ').length - 1,
        1,
        'one response on the connection, not an answer to the request after the body',
      )
      assert.equal(answer.closed, true, 'the server closes the connection after its answer')
    })

    it('takes no byte after IMPORT_MAX_BYTES as a next request, even one that arrives with the body', async (t) => {
      const app = await on.start(t, { importMaxBytes: 2000 })
      const { host } = new URL(app.url)
      const kept = uniqueEmail('kept')
      const chunk = (text: string): string =>
        `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`
      const post = (email: string): string => {
        const json = JSON.stringify({ email, name: 'Never Created' })
        return (
          `POST /users HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${app.token}\r\n` +
          `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`
        )
      }
      const smuggled = uniqueEmail('smuggled')
      const pipelined = uniqueEmail('pipelined')
      // One write, so that all of it arrives with the body: the line that passes the limit, a chunk
      // that reads as a request, the body's end, then a request of its own on the connection.
      const answer = await exchange(
        app.baseUrl,
        'POST /users:import HTTP/1.1\r\n' +
          `host: ${host}\r\nauthorization: Bearer ${app.token}\r\n` +
          'content-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n' +
          chunk(`${JSON.stringify({ email: kept, name: 'Kept' })}\n`) +
          chunk(
            `${JSON.stringify({ email: uniqueEmail('cut'), name: 'Cut', metadata: { pad: 'x'.repeat(2000) } })}\n`,
          ) +
          chunk(post(smuggled)) +
          '0\r\n\r\n' +
          post(pipelined) +
          `GET /healthz HTTP/1.1\r\nhost: ${host}\r\n\r\n`,
        { waitMs: 3000 },
      )
      const { headers, results } = oneImportAnswer(answer.raw)
      assert.equal(headers.get('connection'), 'close')
      assert.deepEqual(
        results.map((result) => [result['line'], result['status'], result['code']]),
        [
          [1, 201, undefined],
          [2, 413, 'payload_too_large'],
        ],
      )
      assert.equal(answer.closed, true, 'the server closes the connection after its answer')
      assert.deepEqual(
        (await app.snapshot()).map((user) => user.email),
        [kept],
      )
      assert.equal((await fetch(`${app.url}/readyz`)).status, 200)
    })

    it('reads on and drops what comes after IMPORT_MAX_BYTES once its answer is out, so the connection closes cleanly', async (t) => {
      const app = await on.start(t, { importMaxBytes: 2000 })
      const { host } = new URL(app.url)
      const kept = uniqueEmail('kept')
      const line = `${JSON.stringify({ email: kept, name: 'Kept' })}\n`
      // 384 KiB past the limit, well inside the lingering bounds (LINGER_BYTES), sent in one go
      // before anything is read, as a blocking client does.
      const filler = `2000\r\n${'x'.repeat(0x2000)}\r\n`.repeat(48)
      const request = Buffer.from(
        'POST /users:import HTTP/1.1\r\n' +
          `host: ${host}\r\nauthorization: Bearer ${app.token}\r\n` +
          'content-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n' +
          `${Buffer.byteLength(line).toString(16)}\r\n${line}\r\n${filler}0\r\n\r\n`,
        'latin1',
      )
      const serverSide = new Promise<Socket>((resolve) => {
        app.service.server.once('connection', resolve)
      })
      // Not exchange(): it drops what the client has not sent yet as soon as the server ends its
      // side. This client ends its side once every byte is sent, and keeps reading until the close.
      const client = await openSocket(app.baseUrl)
      const received: Buffer[] = []
      let error: string | undefined
      client.on('data', (chunk: Buffer) => received.push(chunk))
      client.on('error', (caught: NodeJS.ErrnoException) => {
        error ??= caught.code ?? caught.message
      })
      const closed = new Promise<void>((resolve) => {
        client.once('close', () => {
          resolve()
        })
      })
      const giveUp = setTimeout(() => {
        client.destroy()
      }, 10_000)
      client.write(request)
      await closed
      clearTimeout(giveUp)
      const { headers, results } = oneImportAnswer(Buffer.concat(received).toString('latin1'))
      assert.equal(headers.get('connection'), 'close')
      assert.deepEqual(
        results.map((result) => [result['line'], result['status'], result['code']]),
        [
          [1, 201, undefined],
          [2, 413, 'payload_too_large'],
        ],
      )
      assert.equal(error, undefined, 'a clean close, not a reset')
      const server = await serverSide
      if (!server.closed) await once(server, 'close')
      // Paused at the limit and left so, the body would still sit unread in the kernel when the
      // socket is destroyed, and the client would get a reset instead of a clean close.
      assert.equal(server.bytesRead, request.length, 'the server read on to the end of the body')
      assert.deepEqual(
        (await app.snapshot()).map((user) => user.email),
        [kept],
      )
    })

    it('closes the connection after every import, and processes no request sent behind its body', async (t) => {
      const app = await on.start(t)
      const { host } = new URL(app.url)
      const imported = uniqueEmail('imported')
      const line = `${JSON.stringify({ email: imported, name: 'Imported' })}\n`
      const json = JSON.stringify({ email: uniqueEmail('behind'), name: 'Never Created' })
      const importThenCreate = (token: string): string =>
        'POST /users:import HTTP/1.1\r\n' +
        `host: ${host}\r\nauthorization: Bearer ${token}\r\n` +
        `content-type: application/x-ndjson\r\ncontent-length: ${Buffer.byteLength(line)}\r\n\r\n${line}` +
        `POST /users HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${app.token}\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`
      const answer = await exchange(app.baseUrl, importThenCreate(app.token), { waitMs: 3000 })
      const { headers, results } = oneImportAnswer(answer.raw)
      assert.equal(headers.get('connection'), 'close')
      assert.deepEqual(
        results.map((result) => [result['line'], result['status']]),
        [[1, 201]],
      )
      assert.equal(answer.closed, true, 'the server closes the connection after its answer')
      // A refused import closes the connection too, though its whole body had arrived: a 409 while
      // another import runs, which holds its own body open meanwhile.
      const running = httpRequest(new URL(`${app.baseUrl}/users:import`), {
        method: 'POST',
        headers: { authorization: `Bearer ${app.token}`, ...NDJSON },
      })
      let sawResult: () => void = () => undefined
      const firstResult = new Promise<void>((resolve) => {
        sawResult = resolve
      })
      const runningDone = new Promise<string>((resolve, reject) => {
        running.on('response', (res) => {
          const chunks: Buffer[] = []
          res.on('data', (chunk: Buffer) => {
            chunks.push(chunk)
            sawResult()
          })
          res.on('end', () => {
            resolve(Buffer.concat(chunks).toString('utf8'))
          })
        })
        running.on('error', reject)
      })
      running.write(`${JSON.stringify({ email: uniqueEmail('running'), name: 'Running' })}\n`)
      running.flushHeaders()
      await firstResult
      const refused = await exchange(app.baseUrl, importThenCreate(app.token), { waitMs: 3000 })
      running.end()
      assert.equal(refused.raw.split('HTTP/1.1 ').length - 1, 1, JSON.stringify(refused.raw))
      assert.equal(refused.response?.status, 409, refused.raw)
      assert.equal((refused.response.body as { code?: string }).code, 'import_in_progress')
      assert.equal(refused.response.headers.get('connection'), 'close')
      assert.equal(refused.closed, true, 'the server closes the connection after its refusal')
      assert.deepEqual(
        lines(await runningDone).map((result) => result['status']),
        [201],
      )
      assert.deepEqual((await app.snapshot()).map((user) => user.name).sort(), [
        'Imported',
        'Running',
      ])
    })

    it('keeps what was imported when the client goes away mid-body, logs no error, and takes the next import', async (t) => {
      const app = await on.start(t)
      const url = new URL(`${app.baseUrl}/users:import`)
      const first = httpRequest(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${app.token}`, ...NDJSON },
      })
      first.on('error', () => undefined)
      const gotResult = new Promise<void>((resolve) => {
        first.on('response', (res) => {
          res.on('error', () => undefined)
          res.once('data', () => {
            resolve()
          })
        })
      })
      first.write(`${JSON.stringify({ email: uniqueEmail(), name: 'Before Abort' })}\n`)
      await gotResult
      first.destroy()
      // The import ends on the server (the flag is cleared) once the abort is seen: retry until then.
      let next: Streamed
      do
        next = await streamRequest(app, 'POST', '/users:import', {
          body: [JSON.stringify({ email: uniqueEmail(), name: 'After Abort' })],
        })
      while (next.status === 409)
      assert.equal(lines(next.text)[0]?.['status'], 201)
      assert.deepEqual((await app.snapshot()).map((user) => user.name).sort(), [
        'After Abort',
        'Before Abort',
      ])
      assert.deepEqual(
        app.logs.filter((entry) => entry['level'] === 'error'),
        [],
      )
    })

    it('drops an import whose client reads none of its results for the stall time, and takes the next import', async (t) => {
      const app = await on.start(t, { exportStallTimeoutMs: 300 })
      const { hostname, port } = new URL(app.url)
      const body = Buffer.alloc(2 * 1024 * 1024, 'x\n')
      const socket = connect(Number(port), hostname)
      socket.on('error', () => undefined)
      socket.pause()
      t.after(() => {
        socket.destroy()
      })
      socket.write(
        `POST /users:import HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${app.token}\r\ncontent-type: application/x-ndjson\r\ncontent-length: ${body.length}\r\n\r\n`,
      )
      socket.write(body)
      const line = JSON.stringify({ email: uniqueEmail('next'), name: 'Next Import' })
      const deadline = Date.now() + 10_000
      let next: Streamed
      do next = await streamRequest(app, 'POST', '/users:import', { body: [line] })
      while (next.status === 409 && Date.now() < deadline)
      assert.equal(
        next.status,
        200,
        'the next import is taken well within 10 s of a 300 ms stall time',
      )
      assert.deepEqual(
        lines(next.text).map((result) => result['status']),
        [201],
      )
      const dropped = app.logs.filter(
        (entry) => entry['path'] === '/users:import' && entry['status'] === 499,
      )
      assert.equal(
        dropped.length,
        1,
        'the import that was not read ends as a client that went away',
      )
      assert.deepEqual(
        (await app.snapshot()).map((user) => user.name),
        ['Next Import'],
      )
    })

    it('appends one user.created event per imported user, naming the token and the request', async (t) => {
      const app = await on.start(t)
      const token = makeToken({ sub: 'importer', scope: 'users:admin' })
      const kept = makeUser({ status: 'active', version: 4 })
      const body = [
        `${exportedLine(kept)}\n${JSON.stringify({ email: uniqueEmail(), name: 'Fresh' })}\nnot json\n`,
      ]
      const res = await streamRequest(app, 'POST', '/users:import', {
        body,
        token,
        headers: { 'x-request-id': 'import-run-1' },
      })
      const ids = lines(res.text)
        .filter((result) => result['status'] === 201)
        .map((result) => result['id'])
      assert.equal(ids.length, 2)
      const events = await app.call('GET', '/events?limit=100', {
        token: makeToken({ scope: 'events:read' }),
      })
      assert.equal(events.status, 200, events.text)
      const items = events.json<{
        items: { type: string; userId: string; actor: string; requestId: string; version: number }[]
      }>().items
      // Creates run in parallel: events come in commit order, which need not be the input order.
      assert.deepEqual(
        items.map((event) => [event.type, event.userId, event.actor, event.requestId]).sort(),
        ids.map((id) => ['user.created', id, 'importer', 'import-run-1']).sort(),
      )
      assert.equal(items.find((event) => event.userId === kept.id)?.version, 4)
    })

    it('answers Transfer-Encoding: gzip with 400 problem+json on the export and the import, as on every other route', async (t) => {
      const app = await on.start(t)
      const kept = await app.createUser()
      const { host } = new URL(app.url)
      const line = JSON.stringify({ email: uniqueEmail('gzip'), name: 'Never Imported' })
      for (const [method, target] of [
        ['POST', '/users:import'],
        ['GET', '/users:export'],
        ['POST', '/users'],
      ] as const) {
        const head =
          `${method} ${target} HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${app.token}\r\n` +
          `content-type: ${target === '/users' ? 'application/json' : 'application/x-ndjson'}\r\ntransfer-encoding: gzip\r\n\r\n`
        const answer = await exchange(app.baseUrl, `${head}${line}\n`, {
          waitMs: 3000,
          untilResponse: true,
        })
        assert.equal(
          answer.response?.status,
          400,
          `${method} ${target}: ${JSON.stringify(answer.raw)}`,
        )
        assert.match(
          answer.response.headers.get('content-type') ?? '',
          /^application\/problem\+json/,
        )
        assert.equal((answer.response.body as { code?: string }).code, 'bad_request')
        assert.equal(answer.response.headers.get('connection'), 'close')
      }
      assert.deepEqual(
        (await app.snapshot()).map((user) => user.id),
        [kept.id],
      )
    })

    it('needs users:admin and an NDJSON body', async (t) => {
      const app = await on.start(t)
      const body = JSON.stringify({ email: uniqueEmail(), name: 'Nope' })
      assertProblem(
        await app.call('POST', '/users:import', {
          body,
          contentType: 'application/x-ndjson',
          token: makeToken({ scope: 'users:read users:write' }),
        }),
        403,
        'insufficient_scope',
      )
      assertProblem(
        await app.call('POST', '/users:import', { body, contentType: 'application/json' }),
        415,
        'unsupported_media_type',
      )
      assert.deepEqual(await app.snapshot(), [])
    })
  })
}

describeImport({
  name: 'file store',
  skip: false,
  start: (t, options) => startService(t, options),
  restart: (t, app) => startService(t, { dataDir: app.dataDir }),
})

describeImport({
  name: 'PostgreSQL',
  skip: SKIP_POSTGRES,
  async start(t, options) {
    const schema = freshSchema(t)
    const app = await onPostgres(t, schema, options)
    schemas.set(app, schema)
    return app
  },
  restart(t, app) {
    const schema = schemas.get(app)
    if (schema === undefined) throw new Error('not a service of this suite')
    return onPostgres(t, schema)
  },
})

/**
 * A valid new-user line of exactly `bytes` bytes of UTF-8: metadata values padded with 4-byte
 * emoji, then JSON's white space before the closing brace.
 */
function lineOfBytes(bytes: number): string {
  const metadata: Record<string, string> = {}
  for (let key = 0; key < 32; key += 1) metadata[`k${key}`] = ''
  const user = { email: uniqueEmail('edge'), name: 'Edge', metadata }
  let line = JSON.stringify(user)
  for (let key = 0; key < 32 && Buffer.byteLength(line) < bytes; key += 1) {
    const room = bytes - Buffer.byteLength(line)
    const emoji = Math.min(512, Math.floor(room / 4))
    metadata[`k${key}`] = '\u{1F600}'.repeat(emoji) + 'x'.repeat(emoji < 512 ? room - emoji * 4 : 0)
    line = JSON.stringify(user)
  }
  line = `${line.slice(0, -1)}${' '.repeat(bytes - Buffer.byteLength(line))}}`
  assert.equal(Buffer.byteLength(line), bytes)
  return line
}
