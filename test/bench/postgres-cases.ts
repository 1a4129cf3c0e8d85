// PostgreSQL cases of the benchmark (§11), run by run.ts only when DATABASE_URL is set:
//   scripts/with-postgres.sh npm run bench
// Each case gets a database of its own (CREATE DATABASE, dropped at the end), migrated by the
// first service started on it (dist/bin.js: the schema of the build under test) and then seeded
// with bulk INSERTs. The references are in postgres-reference.ts.
import { randomBytes } from 'node:crypto'

import pg from 'pg'

import { compiledReference } from './compile.js'
import { SERVICE_BENCH_ENV, type Server, startServer, stopServer } from './procs.js'
import { type SeededUser, uuidv7 } from './seed.js'

export const POSTGRES_URL = process.env['DATABASE_URL']

/** What run.ts's runCase needs of one server (the same shape as its Target). */
export interface PgTarget {
  url: string
  pid: number
  script: () => string | Promise<string>
}

export interface PgCaseSetup {
  service: PgTarget
  reference: PgTarget
  close: () => Promise<void>
}

/** What run.ts lends these cases: its entry point, secret and Lua scripts. */
export interface PgBenchContext {
  main: string
  root: string
  benchDir: string
  secret: string
  auth: string
  newDir: (prefix: string) => Promise<string>
  getByIdScript: (ids: string[]) => string
  postScript: () => string
}

const admin = async <T>(fn: (client: pg.Client) => Promise<T>, url = POSTGRES_URL): Promise<T> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}

export interface BenchDatabase {
  url: string
  drop: () => Promise<void>
}

/** A fresh, empty database on DATABASE_URL's server. */
export const createDatabase = async (): Promise<BenchDatabase> => {
  if (POSTGRES_URL === undefined) throw new Error('DATABASE_URL is not set')
  const name = `bench_${randomBytes(6).toString('hex')}`
  await admin((client) => client.query(`CREATE DATABASE ${name}`))
  const url = new URL(POSTGRES_URL)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: async () => {
      await admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
    },
  }
}

const SEED_CHUNK = 5000

/** `count` active users in one database, inserted in chunks with unnest (seconds for 10k). */
export const seedDatabase = async (url: string, count: number): Promise<SeededUser[]> => {
  const start = Date.now() - count - 60_000
  const users: SeededUser[] = []
  for (let i = 0; i < count; i++) {
    const n = i + 1
    users.push({
      id: uuidv7(start + i),
      email: `user${n}@bench.example.com`,
      name: `Bench User ${n}`,
    })
  }
  await admin(async (client) => {
    for (let from = 0; from < users.length; from += SEED_CHUNK) {
      const chunk = users.slice(from, from + SEED_CHUNK)
      const at = chunk.map((_, k) => new Date(start + from + k).toISOString())
      await client.query(
        `INSERT INTO users (id, email, email_key, name, name_key, status, metadata, created_at, updated_at, version)
         SELECT id, email, email, name, lower(name), 'active', '{}', at, at, 1
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS t(id, email, name, at)`,
        [chunk.map((u) => u.id), chunk.map((u) => u.email), chunk.map((u) => u.name), at],
      )
    }
  }, url)
  return users
}

const startPgService = async (ctx: PgBenchContext, url: string, workers: number): Promise<Server> =>
  startServer({
    name: `service (PostgreSQL, WORKERS=${workers})`,
    command: process.execPath,
    args: [ctx.main],
    cwd: ctx.root,
    env: {
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: await ctx.newDir('pg-data'),
      DATABASE_URL: url,
      WORKERS: String(workers),
      JWT_SECRET: ctx.secret,
      ...SERVICE_BENCH_ENV,
    },
    readyz: true,
    timeoutMs: 120_000,
  })

const startPgReference = (
  ctx: PgBenchContext,
  url: string,
  mode: 'get' | 'post',
): Promise<Server> =>
  startServer({
    name: `PostgreSQL ${mode} reference`,
    command: process.execPath,
    args: [compiledReference('postgres-reference'), mode],
    cwd: ctx.root,
    env: { ...process.env, DATABASE_URL: url },
    readyz: false,
  })

const expect = async (
  url: string,
  init: RequestInit,
  status: number,
  what: string,
): Promise<void> => {
  const res = await fetch(url, init)
  const body = await res.text()
  if (res.status !== status)
    throw new Error(`${what}: expected ${status}, got ${res.status}: ${body.slice(0, 300)}`)
}

/**
 * Runs the steps of a setup in order (starting servers, seeding); if one fails, stops the servers
 * started so far and drops the database.
 */
const assemble = async (
  db: BenchDatabase,
  steps: (() => Promise<Server | undefined>)[],
): Promise<{ servers: Server[]; close: () => Promise<void> }> => {
  const servers: Server[] = []
  const close = async (): Promise<void> => {
    for (const server of servers) await stopServer(server)
    await db.drop()
  }
  try {
    for (const step of steps) {
      const server = await step()
      if (server !== undefined) servers.push(server)
    }
  } catch (error) {
    await close().catch(() => undefined)
    throw error
  }
  return { servers, close }
}

const pick = (servers: Server[], index: number): Server => {
  const server = servers[index]
  if (server === undefined) throw new Error('a server did not start')
  return server
}

/** GET /users/{id} against the service on PostgreSQL (WORKERS=1) and the bare pg reference. */
export const pgGetSetup = async (ctx: PgBenchContext, users: number): Promise<PgCaseSetup> => {
  const db = await createDatabase()
  let seeded: SeededUser[] = []
  const { servers, close } = await assemble(db, [
    () => startPgService(ctx, db.url, 1),
    async () => {
      seeded = await seedDatabase(db.url, users)
      return undefined
    },
    () => startPgReference(ctx, db.url, 'get'),
  ])
  const service = pick(servers, 0)
  const reference = pick(servers, 1)
  const ids = seeded.slice(0, 1000).map((u) => u.id)
  const probe = ids[0] ?? ''
  try {
    await expect(
      `${service.url}/users/${probe}`,
      { headers: { authorization: ctx.auth } },
      200,
      'GET /users/{id} (PostgreSQL)',
    )
    await expect(`${reference.url}/users/${probe}`, {}, 200, 'GET /users/{id} (pg reference)')
  } catch (error) {
    await close()
    throw error
  }
  const script = ctx.getByIdScript(ids)
  return {
    service: { url: service.url, pid: service.pid, script: () => script },
    reference: { url: reference.url, pid: reference.pid, script: () => script },
    close,
  }
}

/** POST /users against the service on PostgreSQL and the bare pg reference, one database. */
export const pgPostSetup = async (ctx: PgBenchContext, users: number): Promise<PgCaseSetup> => {
  const db = await createDatabase()
  const { servers, close } = await assemble(db, [
    () => startPgService(ctx, db.url, 1),
    async () => {
      await seedDatabase(db.url, users)
      return undefined
    },
    () => startPgReference(ctx, db.url, 'post'),
  ])
  const service = pick(servers, 0)
  const reference = pick(servers, 1)
  const body = (who: string): string =>
    JSON.stringify({
      email: `check-${who}-${randomBytes(4).toString('hex')}@bench.example.com`,
      name: 'Bench',
    })
  try {
    await expect(
      `${service.url}/users`,
      {
        method: 'POST',
        headers: { authorization: ctx.auth, 'content-type': 'application/json' },
        body: body('svc'),
      },
      201,
      'POST /users (PostgreSQL)',
    )
    await expect(
      `${reference.url}/users`,
      { method: 'POST', headers: { 'content-type': 'application/json' }, body: body('ref') },
      201,
      'POST /users (pg reference)',
    )
  } catch (error) {
    await close()
    throw error
  }
  return {
    service: { url: service.url, pid: service.pid, script: ctx.postScript },
    reference: { url: reference.url, pid: reference.pid, script: ctx.postScript },
    close,
  }
}

/**
 * GET /users/{id} on PostgreSQL with WORKERS=2 (as "service") against WORKERS=1 (as "reference"),
 * both on one database. The CPU per request counts the primary and its workers.
 */
export const pgWorkersSetup = async (ctx: PgBenchContext, users: number): Promise<PgCaseSetup> => {
  const db = await createDatabase()
  let seeded: SeededUser[] = []
  const { servers, close } = await assemble(db, [
    () => startPgService(ctx, db.url, 2),
    async () => {
      seeded = await seedDatabase(db.url, users)
      return undefined
    },
    () => startPgService(ctx, db.url, 1),
  ])
  const two = pick(servers, 0)
  const one = pick(servers, 1)
  const ids = seeded.slice(0, 1000).map((u) => u.id)
  try {
    for (const server of [two, one]) {
      await expect(
        `${server.url}/users/${ids[0] ?? ''}`,
        { headers: { authorization: ctx.auth } },
        200,
        `GET /users/{id} (${server.name})`,
      )
    }
  } catch (error) {
    await close()
    throw error
  }
  const script = ctx.getByIdScript(ids)
  return {
    service: { url: two.url, pid: two.pid, script: () => script },
    reference: { url: one.url, pid: one.pid, script: () => script },
    close,
  }
}
