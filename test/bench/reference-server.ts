// Reference servers for the benchmark, written with bare node:http and nothing else.
//
//   node --import tsx test/bench/reference-server.ts read
//   node --import tsx test/bench/reference-server.ts write <dir>
//   JWT_SECRET=... node --import tsx test/bench/reference-server.ts auth <data dir>
//   node --import tsx test/bench/reference-server.ts events <dir>
//
// `read` answers every request with a fixed JSON body the size of one user.
// `write` reads the request body, then does one durable atomic file write
// (exclusive temp file, write, fsync, close, rename, fsync of the directory)
// and answers 201 with the same JSON.
// `auth` is the limit for GET /users/{id} with a token: it loads <data dir>/users/*.json into a
// Map, verifies an HS256 bearer token once (signature, exp, scope) and caches the verdict by the
// token's text, then answers the user's stored JSON with an ETag, or 401 / 404. It reads the files
// synchronously before listening, the least a start with those users can do (the start-up row).
// `events` is the limit for the live event latency: GET /events holds a text/event-stream open;
// POST /users does the `write` mode's durable write, answers 201 with {"id":...} and, in the same
// turn, writes `data: {"userId":...}` to every open stream.
// All print one JSON line {"msg":"listening","url":...} on stdout, like the service.
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { open, rename, unlink } from 'node:fs/promises'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'

const USER = {
  id: '0190a5b2-3c4d-7e8f-9a0b-1c2d3e4f5a6b',
  email: 'user123@bench.example.com',
  name: 'Bench User 123',
  status: 'active',
  metadata: {},
  createdAt: '2024-07-01T12:00:00.000Z',
  updatedAt: '2024-07-01T12:00:00.000Z',
  version: 1,
}
const BODY = Buffer.from(JSON.stringify(USER))
const ETAG = '"ref-0190a5b2-1"'

const mode = process.argv[2]
const dir = process.argv[3]

const send = (res: ServerResponse, status: number): void => {
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': BODY.length,
    etag: ETAG,
  })
  res.end(BODY)
}

const readBody = (req: IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => resolve(Buffer.concat(chunks)))
    req.on('error', reject)
  })

const durableWrite = async (target: string, data: Buffer): Promise<void> => {
  const tmp = join(dir ?? '.', `.${randomUUID()}.tmp`)
  const fh = await open(tmp, 'wx', 0o600)
  try {
    await fh.writeFile(data)
    await fh.sync()
  } catch (err) {
    await fh.close()
    await unlink(tmp).catch(() => undefined)
    throw err
  }
  await fh.close()
  await rename(tmp, target)
  const dh = await open(dir ?? '.', 'r')
  try {
    await dh.sync()
  } finally {
    await dh.close()
  }
}

const handleWrite = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
  await readBody(req)
  await durableWrite(join(dir ?? '.', `${randomUUID()}.json`), BODY)
  send(res, 201)
}

interface StoredUser {
  body: Buffer
  etag: string
}

const users = new Map<string, StoredUser>()
/** Verified tokens by their text, with their expiry (seconds); a bad token is not cached. */
const verified = new Map<string, number>()
const secret = process.env.JWT_SECRET ?? ''

const loadUsers = (dataDir: string): void => {
  const usersDir = join(dataDir, 'users')
  for (const name of readdirSync(usersDir)) {
    if (!name.endsWith('.json')) continue
    const text = readFileSync(join(usersDir, name), 'utf8')
    const user = JSON.parse(text) as { id: string; version: number }
    users.set(user.id, { body: Buffer.from(text), etag: `"v${user.version}"` })
  }
}

/** HS256 with a cache: a token seen before costs one Map lookup and an expiry check. */
const authorized = (header: string | undefined): boolean => {
  if (header === undefined || !header.startsWith('Bearer ')) return false
  const token = header.slice(7)
  const nowS = Date.now() / 1000
  const exp = verified.get(token)
  if (exp !== undefined) return exp > nowS
  const [head, claims, signature] = token.split('.')
  if (head === undefined || claims === undefined || signature === undefined) return false
  const expected = createHmac('sha256', secret).update(`${head}.${claims}`).digest()
  const given = Buffer.from(signature, 'base64url')
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false
  const header64 = JSON.parse(Buffer.from(head, 'base64url').toString()) as { alg?: unknown }
  const payload = JSON.parse(Buffer.from(claims, 'base64url').toString()) as {
    exp?: unknown
    scope?: unknown
  }
  if (header64.alg !== 'HS256' || typeof payload.exp !== 'number' || payload.exp <= nowS)
    return false
  if (typeof payload.scope !== 'string' || !payload.scope.split(' ').includes('users:read'))
    return false
  verified.set(token, payload.exp)
  return true
}

const handleAuthRead = (req: IncomingMessage, res: ServerResponse): void => {
  req.resume()
  if (!authorized(req.headers.authorization)) {
    res.writeHead(401, { 'content-length': 0 }).end()
    return
  }
  const url = req.url ?? '/'
  const user = url.startsWith('/users/') ? users.get(url.slice(7)) : undefined
  if (user === undefined) {
    res.writeHead(404, { 'content-length': 0 }).end()
    return
  }
  res.writeHead(200, {
    'content-type': 'application/json',
    'content-length': user.body.length,
    etag: user.etag,
  })
  res.end(user.body)
}

const streams = new Set<ServerResponse>()
let eventId = 0

const handleEvents = (req: IncomingMessage, res: ServerResponse): void => {
  if (req.method === 'GET') {
    req.resume()
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' })
    res.write(': ready\n\n')
    streams.add(res)
    res.on('close', () => streams.delete(res))
    return
  }
  readBody(req)
    .then(async () => {
      const id = randomUUID()
      await durableWrite(join(dir ?? '.', `${id}.json`), BODY)
      const body = `{"id":"${id}"}`
      res.writeHead(201, { 'content-type': 'application/json', 'content-length': body.length })
      res.end(body)
      eventId += 1
      const frame = `id: ${eventId}\nevent: user.created\ndata: {"userId":"${id}"}\n\n`
      for (const stream of streams) stream.write(frame)
    })
    .catch((err: unknown) => {
      process.stderr.write(`write failed: ${String(err)}\n`)
      res.writeHead(500).end()
    })
}

const MODES = ['read', 'write', 'auth', 'events']
if (mode === undefined || !MODES.includes(mode)) {
  process.stderr.write(
    'usage: reference-server.ts read | write <dir> | auth <data dir> | events <dir>\n',
  )
  process.exit(2)
}
if (mode !== 'read' && dir === undefined) {
  process.stderr.write(`reference-server.ts ${mode}: missing <dir>\n`)
  process.exit(2)
}
if (mode === 'auth') loadUsers(dir ?? '.')

const server = createServer((req, res) => {
  if (mode === 'auth') {
    handleAuthRead(req, res)
    return
  }
  if (mode === 'events') {
    handleEvents(req, res)
    return
  }
  if (mode === 'read') {
    // Drain the request (there normally is no body) and answer at once.
    req.resume()
    send(res, 200)
    return
  }
  handleWrite(req, res).catch((err: unknown) => {
    process.stderr.write(`write failed: ${String(err)}\n`)
    res.writeHead(500).end()
  })
})
server.keepAliveTimeout = 60_000

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo
  process.stdout.write(
    `${JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${port}`, mode })}\n`,
  )
})

const shutdown = (): void => {
  for (const stream of streams) stream.destroy()
  server.close()
  server.closeAllConnections()
  process.exit(0)
}
process.on('SIGTERM', shutdown)
process.on('SIGINT', shutdown)
