// The fastify reference for GET /users/{id}: what a small service written the usual way with
// fastify 5 and @fastify/jwt costs, on the same user files as the service.
//
//   JWT_SECRET=... node test/bench/fastify-reference.ts <data dir> info|off   (compiled: compile.ts)
//
// It loads <data dir>/users/*.json into a Map before listening, verifies the bearer token with
// @fastify/jwt on every request (HS256, its defaults: no cache of verified tokens), requires the
// users:read scope, and answers the stored JSON with an ETag, or 401 / 403 / 404. `info` turns on
// fastify's own logger (pino at info: a JSON line on stdout as a request comes in and as it is
// answered), as the service logs every request; `off` is fastify's fastest setting. Prints one
// JSON line {"msg":"listening","url":...} on stdout, like the service.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

import fastifyJwt from '@fastify/jwt'
import Fastify from 'fastify'

const [dataDir, logging] = process.argv.slice(2)
if (dataDir === undefined || (logging !== 'info' && logging !== 'off')) {
  process.stderr.write('usage: fastify-reference.ts <data dir> info|off\n')
  process.exit(2)
}

const users = new Map<string, { body: string; etag: string }>()
const usersDir = join(dataDir, 'users')
for (const name of readdirSync(usersDir)) {
  if (!name.endsWith('.json')) continue
  const text = readFileSync(join(usersDir, name), 'utf8')
  const user = JSON.parse(text) as { id: string; version: number }
  users.set(user.id, { body: text, etag: `"v${user.version}"` })
}

const app = Fastify({ logger: logging === 'info' })
await app.register(fastifyJwt, {
  secret: process.env.JWT_SECRET ?? '',
  verify: { algorithms: ['HS256'] },
})

app.get<{ Params: { id: string } }>('/users/:id', async (request, reply) => {
  try {
    await request.jwtVerify()
  } catch {
    return reply.code(401).send()
  }
  const claims = request.user as { scope?: unknown }
  if (typeof claims.scope !== 'string' || !claims.scope.split(' ').includes('users:read'))
    return reply.code(403).send()
  const user = users.get(request.params.id)
  if (user === undefined) return reply.code(404).send()
  return reply.header('content-type', 'application/json').header('etag', user.etag).send(user.body)
})

const url = await app.listen({ host: '127.0.0.1', port: 0 })
process.stdout.write(`${JSON.stringify({ msg: 'listening', url })}\n`)
for (const signal of ['SIGTERM', 'SIGINT'] as const)
  process.on(signal, () => {
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    )
  })
