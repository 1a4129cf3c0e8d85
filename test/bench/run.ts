// Benchmark harness: the built service (dist/bin.js) against bare node:http reference
// servers, same run, same machine, driven by wrk. Not a unit test; run with `npm run bench`.
// See test/bench/README.md.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { cpus, loadavg, platform, release, totalmem } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { compileShim, shimEnv } from '../helpers/syscall-shim.js'
import { compiledReference } from './compile.js'
import { importUsers, rawDurableWrites } from './import-users.js'
import { type LiveResult, measureLiveEvents, quantile } from './live-events.js'
import * as lua from './lua-scripts.js'
import { flipName, nameBody, type PatchTarget } from './lua-scripts.js'
import {
  type PgBenchContext,
  POSTGRES_URL,
  pgGetSetup,
  pgPostSetup,
  pgWorkersSetup,
} from './postgres-cases.js'
import {
  benchServiceEnv,
  installCleanup,
  makeTempRoot,
  rssMb,
  type Server,
  startServer,
  stopServer,
  track,
  treeCpuSeconds,
} from './procs.js'
import { renderRows } from './report.js'
import {
  type CaseResult,
  type ImportResult,
  type LiveCaseResult,
  median,
  type Outcome,
  type Run,
  type StartResult,
  type StartSample,
  type Summary,
} from './results-types.js'
import { buildRows, detailRows, NOT_SELECTED } from './rows.js'
import { type SeededUser, seedDataDir } from './seed.js'
import { makeToken } from './token.js'
import { type WebhookBenchContext, webhookLagCase, webhookPostSetup } from './webhooks.js'
import { ensureWrk, runWrk } from './wrk.js'

const BENCH_DIR = dirname(fileURLToPath(import.meta.url))
const ROOT = resolve(BENCH_DIR, '..', '..')
/** BENCH_DIST: another build of the service to measure (a copy of dist/ made before a change). */
const MAIN = join(resolve(process.env['BENCH_DIST'] ?? join(ROOT, 'dist')), 'bin.js')
const RESULTS = join(BENCH_DIR, 'results', 'latest.json')

const positiveInt = (name: string, fallback: number): number => {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < 1) {
    process.stderr.write(`${name} must be a positive integer, got ${JSON.stringify(raw)}\n`)
    process.exit(1)
  }
  return value
}

const DURATION_S = positiveInt('BENCH_DURATION_S', 5)
const RUNS = positiveInt('BENCH_RUNS', 3)
/** BENCH_ONLY: a comma list of case labels (or their beginnings) to run, for a quick before/after; unset: every case. */
const ONLY = process.env['BENCH_ONLY']
  ?.split(',')
  .map((x) => x.trim())
  .filter((x) => x !== '')

/** A BENCH_ONLY entry: the beginning of a case's label, optionally `@N` for its number of users. */
function selects(wanted: string, label: string, users: number | null): boolean {
  const [prefix = '', count] = wanted.split('@')
  return label.startsWith(prefix) && (count === undefined || String(users) === count)
}
/** wrk's connections; the goals are set at 16 (another count gives informative figures). */
const CONNECTIONS = positiveInt('BENCH_CONNECTIONS', 16)
const WARMUP_S = 1
const PATCH_USERS = 1000
const SMALL = 1000
const MEDIUM = 10_000
const LARGE = 100_000
const SECRET = randomBytes(24).toString('hex')
const TOKEN = makeToken(SECRET)
const AUTH = `Bearer ${TOKEN}`

const log = (line: string): void => {
  process.stderr.write(`${line}\n`)
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------
// Servers

let tempRoot = ''
let dirCounter = 0
const newDir = async (prefix: string): Promise<string> => {
  const dir = join(tempRoot, `${prefix}-${++dirCounter}`)
  await mkdir(dir, { mode: 0o700 })
  return dir
}

/** Runs `fn`; if it throws, runs `close` first, so a failed setup leaves nothing running. */
const closingOnError = async <T>(close: () => Promise<void>, fn: () => Promise<T>): Promise<T> => {
  try {
    return await fn()
  } catch (err) {
    await close().catch(() => undefined)
    throw err
  }
}

interface Service {
  server: Server
  dataDir: string
  users: SeededUser[]
}

/** Start-up time and idle RSS of every measured service start, by seeded user count. */
const startSamples: StartSample[] = []

/** Flushes the file system holding `dir`, so seeding's writeback does not overlap a measurement. */
const syncFs = async (dir: string): Promise<void> => {
  const child = track(spawn('sync', ['-f', dir], { stdio: 'ignore' }))
  await new Promise<void>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', () => resolve())
  })
}

/**
 * Seeds a fresh data dir with `users` users, starts dist/bin.js on it and waits for /readyz.
 * With `sample`, waits 1 s once ready and records start-up time and RSS.
 */
const startService = async (
  users: number,
  sample = false,
  env: Readonly<Record<string, string>> = {},
): Promise<Service> => {
  const dataDir = await newDir('data')
  const seedStart = performance.now()
  const seeded = await seedDataDir(dataDir, users)
  await syncFs(dataDir)
  if (users > 0)
    log(`  seeded ${users} users in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`)
  const server = await closingOnError(
    () => rm(dataDir, { recursive: true, force: true }),
    () => launchService(dataDir, env),
  )
  const service = { server, dataDir, users: seeded }
  if (sample) await sampleStart(server, users)
  return service
}

/** dist/bin.js on the file store in `dataDir`, once /readyz answers 200. */
const launchService = (
  dataDir: string,
  env: Readonly<Record<string, string>> = {},
): Promise<Server> =>
  startServer({
    name: 'service',
    command: process.execPath,
    args: [MAIN],
    cwd: ROOT,
    env: { ...benchServiceEnv(SECRET, dataDir), ...env },
    readyz: true,
    timeoutMs: 120_000,
  })

/** Records a start: its time, and its RSS 1 s after ready. */
const sampleStart = async (server: Server, users: number): Promise<void> => {
  await sleep(1000)
  const rss = rssMb(server.pid)
  startSamples.push({ users, startMs: server.startMs, rssMb: rss })
  log(
    `  service with ${users} users: ready in ${server.startMs.toFixed(0)} ms, RSS ${rss.toFixed(1)} MB`,
  )
}

const stopService = async (service: Service): Promise<void> => {
  await stopServer(service.server)
  await rm(service.dataDir, { recursive: true, force: true })
}

/**
 * Starts a reference server. The write reference gets a directory already holding `files` user
 * files, like the service's data directory, so that both write into directories of one size.
 */
const startReference = async (
  mode: 'read' | 'write',
  files = 0,
  env: Readonly<Record<string, string>> = {},
): Promise<{ server: Server; dir: string | undefined }> => {
  let dir: string | undefined
  if (mode === 'write') {
    dir = await newDir('write-ref')
    if (files > 0) {
      await seedDataDir(dir, files)
      await syncFs(dir)
    }
  }
  const server = await startServer({
    name: `${mode} reference`,
    command: process.execPath,
    args: [
      compiledReference('reference-server'),
      mode,
      ...(dir === undefined ? [] : [files > 0 ? join(dir, 'users') : dir]),
    ],
    cwd: ROOT,
    env: { ...process.env, ...env },
    readyz: false,
  })
  return { server, dir }
}

/** The auth reference over a service's data directory (read only: it loads the user files). */
const startAuthReference = async (dataDir: string): Promise<Server> =>
  startServer({
    name: 'auth reference',
    command: process.execPath,
    args: [compiledReference('reference-server'), 'auth', dataDir],
    cwd: ROOT,
    env: { ...process.env, JWT_SECRET: SECRET },
    readyz: false,
    timeoutMs: 120_000,
  })

/** fastify 5 with @fastify/jwt over a service's data directory (fastify-reference.ts). */
const startFastifyReference = async (dataDir: string, logging: 'info' | 'off'): Promise<Server> =>
  startServer({
    name: `fastify reference, logging ${logging}`,
    command: process.execPath,
    args: [compiledReference('fastify-reference'), dataDir, logging],
    cwd: ROOT,
    env: { ...process.env, JWT_SECRET: SECRET },
    readyz: false,
    timeoutMs: 120_000,
  })

const stopReference = async (ref: { server: Server; dir: string | undefined }): Promise<void> => {
  await stopServer(ref.server)
  if (ref.dir !== undefined) await rm(ref.dir, { recursive: true, force: true })
}

/** One request through fetch before a case, so a broken endpoint fails loudly. */
const expectStatus = async (
  url: string,
  init: RequestInit,
  status: number,
  what: string,
): Promise<Response> => {
  const res = await fetch(url, init)
  if (res.status !== status) {
    const body = await res.text()
    throw new Error(`${what}: expected ${status}, got ${res.status}: ${body.slice(0, 300)}`)
  }
  return res
}

const staticGetScript = (path: string): string => lua.staticGet(AUTH, path)
const getByIdScript = (ids: string[]): string => lua.getById(AUTH, ids)
const postScript = (): string => lua.post(AUTH)
const keyedPostScript = (): string => lua.post(AUTH, true)
const patchScript = (targets: PatchTarget[]): string => lua.patch(AUTH, targets)
const changingPatchScript = (targets: PatchTarget[]): string => lua.changingPatch(AUTH, targets)

// ---------------------------------------------------------------------------
// Cases

interface Target {
  url: string
  /** The server process, whose CPU time is read before and after every run. */
  pid: number
  /**
   * Called before every wrk invocation (warm-up included): a POST script gets a fresh email
   * prefix, a changing PATCH script the current ETags.
   */
  script: () => string | Promise<string>
}

interface CaseSetup {
  service: Target
  reference: Target
  /** GET /users/{id} only: bare node:http + cached HS256 + a Map (the limit with auth). */
  authReference?: Target
  /** GET /users/{id} only: fastify 5 + @fastify/jwt + the same Map, logging at info and off. */
  fastifyReference?: Target
  fastifyQuietReference?: Target
  close: () => Promise<void>
}

const summarize = (results: Run[]): Summary => ({
  rps: median(results.map((r) => r.rps)),
  cpuUsPerReq: median(results.map((r) => r.cpuUsPerReq)),
  p50Ms: median(results.map((r) => r.p50Ms)),
  p99Ms: median(results.map((r) => r.p99Ms)),
  errors: results.reduce((sum, r) => sum + r.errors, 0),
})

const fmtRun = (r: Run): string =>
  `${r.rps.toFixed(0)} rps, ${r.cpuUsPerReq.toFixed(1)} µs CPU/req, p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms, ` +
  `non-2xx ${r.non2xx}, socket errors ${r.socketErrors}`

const wrk = async (target: Target, durationS: number): Promise<Run> => {
  const script = await target.script()
  const before = treeCpuSeconds(target.pid)
  const result = await runWrk({
    url: target.url,
    script,
    tmpDir: tempRoot,
    durationS,
    connections: CONNECTIONS,
  })
  const used = treeCpuSeconds(target.pid) - before
  return {
    ...result,
    cpuUsPerReq: result.requests > 0 ? (used * 1e6) / result.requests : Number.NaN,
  }
}

/**
 * Runs one case RUNS times, alternating service and reference (the order flips every
 * run). With `freshPerRun` every run gets a new setup (new data dir, new processes).
 */
const runCase = async (
  key: string,
  label: string,
  users: number,
  freshPerRun: boolean,
  setup: () => Promise<CaseSetup>,
): Promise<CaseResult> => {
  log(`\n== ${label} (${users} users)`)
  const runs: CaseResult['runs'] = {
    service: [],
    reference: [],
    authReference: [],
    fastifyReference: [],
    fastifyQuietReference: [],
  }
  const all = Object.keys(runs) as (keyof CaseResult['runs'])[]
  let current: CaseSetup | undefined
  try {
    for (let run = 0; run < RUNS; run++) {
      if (current === undefined) {
        current = await setup()
        for (const which of all) {
          const target = current[which]
          if (target !== undefined) await wrk(target, WARMUP_S)
        }
      }
      const order = run % 2 === 0 ? all : [...all].reverse()
      for (const which of order) {
        const target = current[which]
        if (target === undefined) continue
        const result = await wrk(target, DURATION_S)
        runs[which].push(result)
        log(`  run ${run + 1}/${RUNS} ${which.padEnd(21)} ${fmtRun(result)}`)
      }
      if (freshPerRun) {
        await current.close()
        current = undefined
      }
    }
  } finally {
    if (current !== undefined) await current.close()
  }
  const service = summarize(runs.service)
  const reference = summarize(runs.reference)
  const extra = (list: Run[]): Summary | undefined =>
    list.length === 0 ? undefined : summarize(list)
  const authReference = extra(runs.authReference)
  const fastifyReference = extra(runs.fastifyReference)
  const fastifyQuietReference = extra(runs.fastifyQuietReference)
  return {
    key,
    label,
    users,
    service,
    reference,
    ratio: service.rps / reference.rps,
    ...(authReference === undefined
      ? {}
      : { authReference, authRatio: service.rps / authReference.rps }),
    ...(fastifyReference === undefined ? {} : { fastifyReference }),
    ...(fastifyQuietReference === undefined ? {} : { fastifyQuietReference }),
    runs,
  }
}

let readRef: { server: Server; dir: string | undefined } | undefined

const readRefTarget = (script: string): Target => {
  if (readRef === undefined) throw new Error('read reference not started')
  return { url: readRef.server.url, pid: readRef.server.pid, script: () => script }
}

const getByIdCase = (users: number): Promise<CaseResult> =>
  runCase('get-by-id', 'GET /users/{id}', users, false, async () => {
    const service = await startService(users)
    const authRef = await closingOnError(
      () => stopService(service),
      () => startAuthReference(service.dataDir),
    )
    const references = [authRef]
    const close = async (): Promise<void> => {
      for (const ref of references.reverse()) await stopServer(ref)
      await stopService(service)
    }
    return closingOnError(close, async () => {
      const fastifyRef = await startFastifyReference(service.dataDir, 'info')
      references.push(fastifyRef)
      const fastifyQuiet = await startFastifyReference(service.dataDir, 'off')
      references.push(fastifyQuiet)
      const first = service.users[0]
      if (first === undefined) throw new Error('no seeded users')
      for (const url of [service.server.url, ...references.map((ref) => ref.url)]) {
        await (
          await expectStatus(
            `${url}/users/${first.id}`,
            { headers: { authorization: AUTH } },
            200,
            'GET /users/{id}',
          )
        ).arrayBuffer()
      }
      const script = getByIdScript(service.users.map((u) => u.id))
      return {
        service: { url: service.server.url, pid: service.server.pid, script: () => script },
        reference: readRefTarget(script),
        authReference: { url: authRef.url, pid: authRef.pid, script: () => script },
        fastifyReference: { url: fastifyRef.url, pid: fastifyRef.pid, script: () => script },
        fastifyQuietReference: {
          url: fastifyQuiet.url,
          pid: fastifyQuiet.pid,
          script: () => script,
        },
        close,
      }
    })
  })

/** Limits high enough never to refuse the load: every request is counted and told its fields. */
const RATE_LIMITS_ON = { RATE_LIMIT_SUBJECT: '1000000/1', RATE_LIMIT_ADDRESS: '1000000/1' }

/** GET /users/{id} with rate limits on against the same service with them off (the default). */
const getByIdLimitedCase = (users: number): Promise<CaseResult> =>
  runCase(
    'get-by-id-rate-limited',
    'GET /users/{id} with rate limits on',
    users,
    false,
    async () => {
      const limited = await startService(users, false, RATE_LIMITS_ON)
      const off = await closingOnError(
        () => stopService(limited),
        () => startService(users),
      )
      const close = async (): Promise<void> => {
        await stopService(off)
        await stopService(limited)
      }
      return closingOnError(close, async () => {
        for (const [service, counted] of [
          [limited, true],
          [off, false],
        ] as const) {
          const first = service.users[0]
          if (first === undefined) throw new Error('no seeded users')
          const res = await expectStatus(
            `${service.server.url}/users/${first.id}`,
            { headers: { authorization: AUTH } },
            200,
            'GET /users/{id}',
          )
          await res.arrayBuffer()
          if ((res.headers.get('ratelimit') !== null) !== counted) {
            throw new Error(
              `GET /users/{id}: RateLimit field ${counted ? 'missing' : 'sent with limits off'}`,
            )
          }
        }
        const target = (service: Service): Target => {
          const script = getByIdScript(service.users.map((u) => u.id))
          return { url: service.server.url, pid: service.server.pid, script: () => script }
        }
        return { service: target(limited), reference: target(off), close }
      })
    },
  )

/** RSS in MB of the list-case services after their load runs, by user count (informative). */
const rssAfterLoad: Record<string, number> = {}

/** Median time of GET /metrics (ms), by user count, measured after the list case's load. */
const scrapeMs: Record<string, number> = {}

const SCRAPES = 21

const timeScrapes = async (url: string): Promise<number> => {
  const times: number[] = []
  for (let i = 0; i < SCRAPES; i++) {
    const started = performance.now()
    const res = await fetch(`${url}/metrics`)
    await res.arrayBuffer()
    if (res.status !== 200) throw new Error(`GET /metrics: ${res.status}`)
    times.push(performance.now() - started)
  }
  return median(times)
}

const listCase = (users: number): Promise<CaseResult> =>
  runCase(`list-${users}`, 'GET /users?limit=100', users, false, async () => {
    const service = await startService(users)
    const close = async (): Promise<void> => {
      try {
        rssAfterLoad[`list-${users}`] = rssMb(service.server.pid)
        scrapeMs[`list-${users}`] = await timeScrapes(service.server.url)
      } catch {
        // The process is gone; stopService below reports nothing either way.
      }
      await stopService(service)
    }
    return closingOnError(close, async () => {
      const path = '/users?limit=100'
      await (
        await expectStatus(
          `${service.server.url}${path}`,
          { headers: { authorization: AUTH } },
          200,
          'GET /users?limit=100',
        )
      ).arrayBuffer()
      const script = staticGetScript(path)
      return {
        service: { url: service.server.url, pid: service.server.pid, script: () => script },
        reference: readRefTarget(script),
        close,
      }
    })
  })

/**
 * BENCH_SLOW_SYNC_MS: how long every fsync and fdatasync takes in the slow-disk POST case (the
 * test suite's LD_PRELOAD shim, on the service and on its reference alike; default 2 ms, about a
 * network volume's sync). This machine's own disk syncs in about 0.25 ms.
 */
const SLOW_SYNC_MS = positiveInt('BENCH_SLOW_SYNC_MS', 2)

/** The shim's environment for the slow-disk case, or why it cannot run (no `cc`, not Linux). */
const slowDiskEnv = (): Record<string, string> | string => {
  const shim = compileShim()
  if (shim.library === undefined) return `skipped: ${shim.skip}`
  return shimEnv(shim.library, { syncDelayMs: SLOW_SYNC_MS })
}

const postCase = (
  users: number,
  env: Readonly<Record<string, string>> = {},
  key = `post-${users}`,
): Promise<CaseResult> =>
  runCase(key, 'POST /users', users, true, async () => {
    const service = await startService(users, false, env)
    const writeRef = await closingOnError(
      () => stopService(service),
      () => startReference('write', users, env),
    )
    const close = async (): Promise<void> => {
      await stopService(service)
      await stopReference(writeRef)
    }
    return closingOnError(close, async () => {
      await (
        await expectStatus(
          `${service.server.url}/users`,
          {
            method: 'POST',
            headers: { authorization: AUTH, 'content-type': 'application/json' },
            body: JSON.stringify({
              email: `check-${randomBytes(4).toString('hex')}@bench.example.com`,
              name: 'Bench',
            }),
          },
          201,
          'POST /users',
        )
      ).arrayBuffer()
      // Every wrk run gets its own random prefix, so emails stay unique across runs.
      return {
        service: { url: service.server.url, pid: service.server.pid, script: postScript },
        reference: { url: writeRef.server.url, pid: writeRef.server.pid, script: postScript },
        close,
      }
    })
  })

/**
 * POST /users with an Idempotency-Key of its own on every request, against the same POST without
 * one on a second service of the same size (both fresh).
 */
const keyedPostCase = (users: number): Promise<CaseResult> =>
  runCase('post-keyed', 'POST /users with an Idempotency-Key', users, true, async () => {
    const keyed = await startService(users)
    const plain = await closingOnError(
      () => stopService(keyed),
      () => startService(users),
    )
    const close = async (): Promise<void> => {
      await stopService(plain)
      await stopService(keyed)
    }
    return closingOnError(close, async () => {
      const res = await expectStatus(
        `${keyed.server.url}/users`,
        {
          method: 'POST',
          headers: {
            authorization: AUTH,
            'content-type': 'application/json',
            'idempotency-key': `"check-${randomBytes(4).toString('hex')}"`,
          },
          body: JSON.stringify({
            email: `check-${randomBytes(4).toString('hex')}@bench.example.com`,
            name: 'Bench',
          }),
        },
        201,
        'POST /users with an Idempotency-Key',
      )
      await res.arrayBuffer()
      return {
        service: { url: keyed.server.url, pid: keyed.server.pid, script: keyedPostScript },
        reference: { url: plain.server.url, pid: plain.server.pid, script: postScript },
        close,
      }
    })
  })

/** The current ETag and name of a user, read through the API. */
const currentOf = async (base: string, user: SeededUser): Promise<PatchTarget> => {
  const res = await expectStatus(
    `${base}/users/${user.id}`,
    { headers: { authorization: AUTH } },
    200,
    'GET /users/{id}',
  )
  const body: unknown = await res.json()
  const etag = res.headers.get('etag')
  if (etag === null) throw new Error(`GET /users/${user.id}: no ETag header`)
  const name =
    typeof body === 'object' && body !== null && 'name' in body && typeof body.name === 'string'
      ? body.name
      : user.name
  return { id: user.id, etag, name }
}

/**
 * PATCH /users/{id} with If-Match over PATCH_USERS seeded users. `changing` false: a no-op
 * merge patch (same name; ETag kept). `changing` true: the name flips on every request.
 */
const patchCase = (users: number, changing: boolean): Promise<CaseResult> =>
  runCase(
    changing ? 'patch-change' : 'patch-noop',
    `PATCH /users/{id} (${changing ? 'change' : 'no-op'})`,
    users,
    false,
    async () => {
      const service = await startService(users)
      const writeRef = await closingOnError(
        () => stopService(service),
        () => startReference('write'),
      )
      const close = async (): Promise<void> => {
        await stopService(service)
        await stopReference(writeRef)
      }
      return closingOnError(close, async () => {
        const base = service.server.url
        const picked = service.users.slice(0, Math.min(PATCH_USERS, service.users.length - 1))
        const current = async (): Promise<PatchTarget[]> => {
          const targets: PatchTarget[] = []
          for (const user of picked) targets.push(await currentOf(base, user))
          return targets
        }
        // Probe, on a user outside the wrk list, that the PATCH is a 200 and what it does to the ETag.
        const probeUser = service.users[service.users.length - 1]
        if (probeUser === undefined) throw new Error('no seeded users')
        const probe = await currentOf(base, probeUser)
        const patched = await expectStatus(
          `${base}/users/${probe.id}`,
          {
            method: 'PATCH',
            headers: {
              authorization: AUTH,
              'content-type': 'application/merge-patch+json',
              'if-match': probe.etag,
            },
            body: nameBody(changing ? flipName(probe.name) : probe.name),
          },
          200,
          `PATCH /users/{id} (${changing ? 'change' : 'no-op'}, If-Match)`,
        )
        await patched.arrayBuffer()
        const after = patched.headers.get('etag')
        if (!changing && after !== probe.etag) {
          log(
            `  warning: a no-op PATCH changed the ETag (${probe.etag} -> ${String(after)}); expect 412s`,
          )
        }
        if (changing && after === probe.etag) {
          log(`  warning: a changing PATCH kept the ETag ${probe.etag}`)
        }
        if (!changing) {
          const script = patchScript(await current())
          return {
            service: { url: base, pid: service.server.pid, script: () => script },
            reference: { url: writeRef.server.url, pid: writeRef.server.pid, script: () => script },
            close,
          }
        }
        const refScript = changingPatchScript(await current())
        return {
          service: {
            url: base,
            pid: service.server.pid,
            script: async () => changingPatchScript(await current()),
          },
          reference: {
            url: writeRef.server.url,
            pid: writeRef.server.pid,
            script: () => refScript,
          },
          close,
        }
      })
    },
  )

/** Starts the service on an empty data dir RUNS times. */
const idleStartCase = async (): Promise<void> => {
  log('\n== start-up and RSS, empty data dir')
  for (let run = 0; run < RUNS; run++) {
    await stopService(await startService(0, true))
  }
}

/**
 * Start with `users` users: one data dir seeded once (so its files are in the page cache for every
 * start). Each run starts the service without a snapshot (every file read: a first start, or one
 * after a crash), stops it with SIGTERM (the clean stop writes the snapshot), then times the start
 * that reads it (spawn to the first 200 of /readyz; its RSS 1 s later), alternating with the auth
 * reference on the same files (spawn to its listening line, printed once it has read every file
 * into a Map).
 */
const startCase = async (users: number): Promise<StartResult> => {
  log(`\n== start with ${users} users`)
  const dataDir = await newDir('start')
  try {
    const seedStart = performance.now()
    await seedDataDir(dataDir, users)
    await syncFs(dataDir)
    log(`  seeded ${users} users in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`)
    const result: StartResult = { users, serviceMs: [], filesMs: [], stopMs: [], referenceMs: [] }
    for (let run = 0; run < RUNS; run++) {
      const order =
        run % 2 === 0 ? (['service', 'reference'] as const) : (['reference', 'service'] as const)
      for (const which of order) {
        if (which === 'service') {
          await rm(join(dataDir, 'snapshot'), { force: true })
          const first = await launchService(dataDir)
          result.filesMs.push(first.startMs)
          const stopping = performance.now()
          await stopServer(first)
          result.stopMs.push(performance.now() - stopping)
          await syncFs(dataDir)
          const server = await launchService(dataDir)
          try {
            result.serviceMs.push(server.startMs)
            log(
              `  service with ${users} users: ${first.startMs.toFixed(0)} ms reading the files, stop ${(result.stopMs.at(-1) ?? 0).toFixed(0)} ms, ${server.startMs.toFixed(0)} ms from the snapshot`,
            )
            if (users === LARGE) await sampleStart(server, LARGE)
          } finally {
            await stopServer(server)
          }
        } else {
          const server = await startAuthReference(dataDir)
          result.referenceMs.push(server.startMs)
          log(
            `  auth reference with ${users} users: listening after ${server.startMs.toFixed(0)} ms`,
          )
          await stopServer(server)
        }
      }
    }
    return result
  } finally {
    await rm(dataDir, { recursive: true, force: true })
  }
}

/** BENCH_WEBHOOK_RATE: writes per second of the webhook lag case (default 1,000, the goal's rate). */
const WEBHOOK_RATE = positiveInt('BENCH_WEBHOOK_RATE', 1000)

/** BENCH_IMPORT_USERS: new users per import run (default 20,000). */
const IMPORT_USERS = positiveInt('BENCH_IMPORT_USERS', 20_000)

/**
 * POST /users:import of IMPORT_USERS new users into a fresh service on the file store, RUNS
 * times, alternating with the reference: as many raw durable file writes, 64 at a time.
 */
const importCase = async (): Promise<ImportResult> => {
  log(`\n== POST /users:import, ${IMPORT_USERS} new users, file store`)
  const result: ImportResult = { service: [], reference: [], failed: 0 }
  for (let run = 0; run < RUNS; run++) {
    const order =
      run % 2 === 0 ? (['service', 'reference'] as const) : (['reference', 'service'] as const)
    for (const which of order) {
      if (which === 'service') {
        const service = await startService(0)
        try {
          const imported = await importUsers(service.server.url, AUTH, IMPORT_USERS)
          const created = imported.statuses.get(201) ?? 0
          result.failed += IMPORT_USERS - created
          const rate = created / (imported.ms / 1000)
          result.service.push(rate)
          log(
            `  run ${run + 1}/${RUNS} service    ${created} created in ${(imported.ms / 1000).toFixed(1)} s: ${rate.toFixed(0)} users/s; statuses ${JSON.stringify([...imported.statuses])}`,
          )
        } finally {
          await stopService(service)
        }
      } else {
        const dir = await newDir('import-ref')
        try {
          const rate = await rawDurableWrites(dir, IMPORT_USERS)
          result.reference.push(rate)
          log(`  run ${run + 1}/${RUNS} reference  ${rate.toFixed(0)} raw durable files/s`)
        } finally {
          await rm(dir, { recursive: true, force: true })
        }
      }
    }
  }
  return result
}

const liveSummary = (r: LiveResult): string =>
  `${r.acknowledged} writes, median ${quantile(r.latencies, 0.5).toFixed(2)} ms, p99 ${quantile(r.latencies, 0.99).toFixed(2)} ms, ` +
  `frame before the answer ${r.framesFirst}, never arrived ${r.missing}, failed ${r.errors}`

/**
 * Live event latency: CONNECTIONS writers creating users for DURATION_S seconds with one SSE
 * subscriber, against the service (a fresh file store) and the events reference (the same raw
 * durable write per request, then the answer and the frame in one turn), alternating, RUNS times.
 */
const liveCase = async (): Promise<LiveCaseResult> => {
  log(`\n== live event latency, ${CONNECTIONS} writers, one subscriber`)
  const service = await startService(0)
  const dir = await newDir('events-ref')
  const reference = await closingOnError(
    () => stopService(service),
    () =>
      startServer({
        name: 'events reference',
        command: process.execPath,
        args: [compiledReference('reference-server'), 'events', dir],
        cwd: ROOT,
        readyz: false,
      }),
  )
  try {
    const targets = {
      service: { url: service.server.url, auth: AUTH },
      reference: { url: reference.url, auth: undefined },
    }
    for (const target of Object.values(targets))
      await measureLiveEvents({ ...target, durationS: WARMUP_S, writers: CONNECTIONS })
    const result: LiveCaseResult = { service: [], reference: [] }
    for (let run = 0; run < RUNS; run++) {
      const order =
        run % 2 === 0 ? (['service', 'reference'] as const) : (['reference', 'service'] as const)
      for (const which of order) {
        const measured = await measureLiveEvents({
          ...targets[which],
          durationS: DURATION_S,
          writers: CONNECTIONS,
        })
        result[which].push(measured)
        log(`  run ${run + 1}/${RUNS} ${which.padEnd(10)} ${liveSummary(measured)}`)
      }
    }
    return result
  } finally {
    await stopServer(reference)
    await stopService(service)
    await rm(dir, { recursive: true, force: true })
  }
}

// ---------------------------------------------------------------------------
// Report

// ---------------------------------------------------------------------------
// Main

const main = async (): Promise<void> => {
  ensureWrk()
  if (!existsSync(MAIN)) {
    process.stderr.write(`${MAIN} not found: run \`npm run build\` first (npm run bench does)\n`)
    process.exit(1)
  }
  installCleanup()
  tempRoot = makeTempRoot()
  const startedAt = new Date()
  const loadAtStart = loadavg()
  const cpu = cpus()
  const machine = {
    cpu: cpu[0]?.model ?? 'unknown',
    cores: cpu.length,
    totalMemMb: Math.round(totalmem() / 1024 / 1024),
    os: `${platform()} ${release()}`,
    node: process.version,
    loadAvgStart: loadAtStart,
  }
  log(
    `bench: ${RUNS} run(s) of ${DURATION_S} s per case and server, wrk -t1 -c${CONNECTIONS}, temp ${tempRoot}`,
  )
  if ((loadAtStart[0] ?? 0) > cpu.length / 2) {
    log(
      `warning: load average ${loadAtStart.map((x) => x.toFixed(2)).join(' ')} on ${cpu.length} cores; figures will be noisy`,
    )
  }

  readRef = await startReference('read')
  const cases: CaseResult[] = []
  const failures: { case: string; error: string }[] = []

  const attempt = async <T>(
    label: string,
    users: number | null,
    fn: () => Promise<T>,
  ): Promise<Outcome<T>> => {
    if (ONLY !== undefined && !ONLY.some((wanted) => selects(wanted, label, users)))
      return { ok: false, why: NOT_SELECTED }
    try {
      const value = await fn()
      return { ok: true, value }
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err)
      log(`  ERROR in ${label}: ${message}`)
      failures.push({ case: label, error: message })
      return { ok: false, why: `error: ${message.split('\n')[0]?.slice(0, 60) ?? ''}` }
    }
  }
  const measured = (outcome: Outcome<CaseResult>): Outcome<CaseResult> => {
    if (outcome.ok) cases.push(outcome.value)
    return outcome
  }

  const getById = measured(await attempt('GET /users/{id}', MEDIUM, () => getByIdCase(MEDIUM)))
  const getByIdLimited = measured(
    await attempt('GET /users/{id} with rate limits on', MEDIUM, () => getByIdLimitedCase(MEDIUM)),
  )
  const list1k = measured(await attempt('GET /users?limit=100', SMALL, () => listCase(SMALL)))
  const list100k = measured(await attempt('GET /users?limit=100', LARGE, () => listCase(LARGE)))
  const post1k = measured(await attempt('POST /users', SMALL, () => postCase(SMALL)))
  const post100k = measured(await attempt('POST /users', LARGE, () => postCase(LARGE)))
  const postKeyed = measured(
    await attempt('POST /users with an Idempotency-Key', SMALL, () => keyedPostCase(SMALL)),
  )
  const webhookContext: WebhookBenchContext = {
    secret: SECRET,
    auth: AUTH,
    durationS: DURATION_S,
    runs: RUNS,
    lagRate: WEBHOOK_RATE,
    warmupS: WARMUP_S,
    log,
    startService: async (users, env) => {
      const service = await startService(users, false, env)
      return {
        url: service.server.url,
        pid: service.server.pid,
        close: () => stopService(service),
      }
    },
    postScript,
  }
  const postWebhook = measured(
    await attempt('POST /users with a webhook endpoint', SMALL, () =>
      runCase('post-webhook', 'POST /users with a webhook endpoint', SMALL, true, () =>
        webhookPostSetup(webhookContext, SMALL),
      ),
    ),
  )
  const webhookLag = await attempt('webhook delivery lag', SMALL, () =>
    webhookLagCase(webhookContext, SMALL),
  )
  const slowEnv = slowDiskEnv()
  const postSlowDisk: Outcome<CaseResult> =
    typeof slowEnv === 'string'
      ? { ok: false, why: slowEnv }
      : measured(
          await attempt(`POST /users, syncs of ${SLOW_SYNC_MS} ms`, SMALL, () =>
            postCase(SMALL, slowEnv, `post-slow-sync-${SMALL}`),
          ),
        )
  const imported = await attempt('POST /users:import', IMPORT_USERS, importCase)
  const patchNoop = measured(
    await attempt('PATCH /users/{id} (no-op)', MEDIUM, () => patchCase(MEDIUM, false)),
  )
  const patchChange = measured(
    await attempt('PATCH /users/{id} (change)', MEDIUM, () => patchCase(MEDIUM, true)),
  )

  const pgSkipped: Outcome<CaseResult> = {
    ok: false,
    why: 'skipped: DATABASE_URL is not set (scripts/with-postgres.sh npm run bench)',
  }
  let pgGet: Outcome<CaseResult> = pgSkipped
  let pgPost: Outcome<CaseResult> = pgSkipped
  let pgWorkers: Outcome<CaseResult> = pgSkipped
  if (POSTGRES_URL === undefined) {
    log('\n== PostgreSQL cases skipped: DATABASE_URL is not set')
  } else {
    const pgContext: PgBenchContext = {
      main: MAIN,
      root: ROOT,
      benchDir: BENCH_DIR,
      secret: SECRET,
      auth: AUTH,
      newDir,
      getByIdScript,
      postScript,
    }
    const pgCase = (
      key: string,
      label: string,
      fresh: boolean,
      setup: typeof pgGetSetup,
    ): Promise<Outcome<CaseResult>> =>
      attempt(label, MEDIUM, () =>
        runCase(key, label, MEDIUM, fresh, () => setup(pgContext, MEDIUM)),
      ).then(measured)
    pgGet = await pgCase('pg-get-by-id', 'PostgreSQL GET /users/{id}', false, pgGetSetup)
    pgPost = await pgCase('pg-post', 'PostgreSQL POST /users', true, pgPostSetup)
    pgWorkers = await pgCase('pg-workers', 'PostgreSQL WORKERS=2 vs 1', false, pgWorkersSetup)
  }

  const started = await attempt('start-up', LARGE, () => startCase(LARGE))
  const started10k = await attempt('start-up', MEDIUM, () => startCase(MEDIUM))
  const idle = await attempt('start-up', 0, idleStartCase)
  const live = await attempt('live event latency', null, liveCase)

  await stopReference(readRef)

  const rows = buildRows({
    getById,
    getByIdLimited,
    postKeyed,
    postWebhook,
    webhookLag,
    webhookLagRate: WEBHOOK_RATE,
    post1k,
    post100k,
    postSlowDisk,
    slowSyncMs: SLOW_SYNC_MS,
    list1k,
    list100k,
    patchNoop,
    patchChange,
    imported,
    importUsers: IMPORT_USERS,
    pgGet,
    pgPost,
    pgWorkers,
    started,
    started10k,
    idle,
    live,
    startSamples,
    scrapeMs,
    rssAfterLoad,
  })

  const header = [
    `machine: ${machine.cpu}, ${machine.cores} cores, ${machine.totalMemMb.toLocaleString('en-US')} MB, ${machine.os}; Node ${machine.node}`,
    `runs: ${RUNS} per case (medians), ${DURATION_S} s each per server, wrk -t1 -c${CONNECTIONS}, service and reference alternated; load average at start ${loadAtStart.map((x) => x.toFixed(2)).join(' ')}, at end ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  ]
  const issueRows = rows.filter((r) => r.section === 'issue')
  // Every row of the issue's table is printed; of the others, those that were selected.
  const otherRows = rows.filter((r) => r.section === 'other' && r.met !== NOT_SELECTED)
  const verdicts = issueRows.map((r) => r.met)
  process.stdout.write(
    [
      '',
      ...header,
      '',
      'Issue 30, each figure against its reference measured in this run:',
      '',
      renderRows(issueRows),
      '',
      `${verdicts.filter((m) => m === 'met').length} met, ${verdicts.filter((m) => m === 'missed').length} missed, ${verdicts.filter((m) => m !== 'met' && m !== 'missed').length} without a verdict.`,
      '',
      ...(otherRows.length === 0
        ? []
        : ["The project's earlier figures:", '', renderRows(otherRows), '']),
      ...(cases.length === 0
        ? []
        : [
            'Per case (medians; CPU is user + system time of the server and its children per request):',
            '',
            detailRows(cases),
            '',
          ]),
    ].join('\n'),
  )

  const report = {
    date: startedAt.toISOString(),
    machine: { ...machine, loadAvgEnd: loadavg() },
    config: {
      durationS: DURATION_S,
      runs: RUNS,
      connections: CONNECTIONS,
      threads: 1,
      warmupS: WARMUP_S,
      importUsers: IMPORT_USERS,
    },
    table: rows,
    cases,
    import: imported.ok ? imported.value : undefined,
    start: started.ok ? started.value : undefined,
    live: live.ok
      ? {
          service: live.value.service.map(({ latencies, ...rest }) => ({
            ...rest,
            medianMs: quantile(latencies, 0.5),
            p99Ms: quantile(latencies, 0.99),
          })),
          reference: live.value.reference.map(({ latencies, ...rest }) => ({
            ...rest,
            medianMs: quantile(latencies, 0.5),
            p99Ms: quantile(latencies, 0.99),
          })),
        }
      : undefined,
    webhookLag: webhookLag.ok ? webhookLag.value : undefined,
    startSamples,
    rssAfterLoadMb: rssAfterLoad,
    metricsScrapeMs: scrapeMs,
    failures,
  }
  await mkdir(dirname(RESULTS), { recursive: true })
  await writeFile(RESULTS, `${JSON.stringify(report, null, 2)}\n`)
  log(`\nresults written to ${RESULTS}`)
  // A missed goal is a result; a case that could not run is not.
  if (failures.length > 0) {
    log(`${failures.length} case(s) could not run: ${failures.map((f) => f.case).join(', ')}`)
    process.exitCode = 1
  }
}

main().then(
  () => process.exit(),
  (err: unknown) => {
    process.stderr.write(
      `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    )
    process.exit(1)
  },
)
