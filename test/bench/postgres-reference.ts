// The PostgreSQL reference for the benchmark: bare node:http and the pg driver, no service code.
//
//   DATABASE_URL=... node --import tsx test/bench/postgres-reference.ts get
//   DATABASE_URL=... node --import tsx test/bench/postgres-reference.ts post
//
// `get` answers GET /users/<id> with one single-row SELECT by primary key on the service's
// `users` table (the service's columns), the row as JSON and an ETag, or a 404.
// `post` reads the body, parses it, and makes the same inserts as the service in one transaction:
// the user's row into the same table (same indexes) and its event's row into `events`, then
// answers 201 with the row as JSON. Event ids are its own negative numbers, so that they never
// meet the service's (the two share a database); nothing serialises them.
// Neither checks a token. Both print {"msg":"listening","url":...} on stdout, like the service.
import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

import pg from 'pg'

interface Row {
  id: string
  email: string
  name: string
  status: string
  metadata: string
  created_at: string
  updated_at: string
  version: number
}

const mode = process.argv[2]
const url = process.env['DATABASE_URL']
if ((mode !== 'get' && mode !== 'post') || url === undefined) {
  process.stderr.write('usage: DATABASE_URL=... postgres-reference.ts get|post\n')
  process.exit(2)
}
// The service's default pool size.
const pool = new pg.Pool({ connectionString: url, max: 10 })
const COLUMNS =
  'id, email, name, status, metadata::text AS metadata, created_at, updated_at, version'

const toJson = (row: Row): string =>
  `{"id":${JSON.stringify(row.id)},"email":${JSON.stringify(row.email)},"name":${JSON.stringify(row.name)},` +
  `"status":${JSON.stringify(row.status)},"metadata":${row.metadata},"createdAt":${JSON.stringify(row.created_at)},` +
  `"updatedAt":${JSON.stringify(row.updated_at)},"version":${row.version}}`

const send = (res: ServerResponse, status: number, body: string, etag?: string): void => {
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  }
  if (etag !== undefined) headers['etag'] = etag
  res.writeHead(status, headers)
  res.end(body)
}

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })

const get = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
  const id = req.url?.startsWith('/users/') === true ? req.url.slice('/users/'.length) : ''
  const result = await pool.query<Row>({
    name: 'ref_get',
    text: `SELECT ${COLUMNS} FROM users WHERE id = $1`,
    values: [id],
  })
  const row = result.rows[0]
  if (row === undefined) send(res, 404, '{"code":"not_found"}')
  else send(res, 200, toJson(row), `"v${row.version}"`)
}

/** Event ids of this process, below every id the service hands out. */
let eventId = 0

const post = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
  const input = JSON.parse(await readBody(req)) as { email: string; name: string }
  const at = new Date().toISOString()
  const row: Row = {
    id: randomUUID(),
    email: input.email,
    name: input.name,
    status: 'pending',
    metadata: '{}',
    created_at: at,
    updated_at: at,
    version: 1,
  }
  const client = await pool.connect()
  try {
    await client.query('BEGIN')
    await client.query({
      name: 'ref_insert',
      text: 'INSERT INTO users (id, email, email_key, name, name_key, status, metadata, created_at, updated_at, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)',
      values: [
        row.id,
        row.email,
        row.email.toLowerCase(),
        row.name,
        row.name.toLowerCase(),
        row.status,
        row.metadata,
        at,
        at,
        1,
      ],
    })
    eventId -= 1
    await client.query({
      name: 'ref_event',
      text: 'INSERT INTO events (id, type, time, user_id, version, actor, request_id, changed, user_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
      values: [eventId, 'user.created', at, row.id, 1, 'bench', null, null, toJson(row)],
    })
    await client.query('COMMIT')
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined)
    throw error
  } finally {
    client.release()
  }
  send(res, 201, toJson(row), '"v1"')
}

const server = createServer((req, res) => {
  const handle = mode === 'get' ? get : post
  handle(req, res).catch((error: unknown) => {
    if (!res.headersSent) send(res, 500, JSON.stringify({ error: String(error) }))
  })
})
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo
  process.stdout.write(`${JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${port}` })}\n`)
})
process.on('SIGTERM', () => {
  server.close()
  void pool.end().then(() => process.exit(0))
})
