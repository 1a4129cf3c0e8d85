// Reference servers for the benchmark, written with bare node:http and nothing else.
//
//   node --import tsx test/bench/reference-server.ts read
//   node --import tsx test/bench/reference-server.ts write <dir>
//
// `read` answers every request with a fixed JSON body the size of one user.
// `write` reads the request body, then does one durable atomic file write
// (exclusive temp file, write, fsync, close, rename, fsync of the directory)
// and answers 201 with the same JSON.
// Both print one JSON line {"msg":"listening","url":...} on stdout, like the service.
import { randomUUID } from 'node:crypto'
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

if (mode !== 'read' && mode !== 'write') {
  process.stderr.write('usage: reference-server.ts read | write <dir>\n')
  process.exit(2)
}
if (mode === 'write' && dir === undefined) {
  process.stderr.write('reference-server.ts write: missing <dir>\n')
  process.exit(2)
}

const server = createServer((req, res) => {
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
  process.stdout.write(`${JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${port}`, mode })}\n`)
})

const shutdown = (): void => {
  server.close()
  server.closeAllConnections()
  process.exit(0)
}
process.on('SIGTERM', shutdown)
process.on('SIGINT', shutdown)
