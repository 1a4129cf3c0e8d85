// Benchmark harness: the built service (dist/main.js) against bare node:http reference
// servers, same run, same machine, driven by wrk. Not a unit test; run with `npm run bench`.
// See test/bench/README.md.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { cpus, loadavg, platform, release, totalmem } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import {
  type PgBenchContext,
  POSTGRES_URL,
  pgGetSetup,
  pgPostSetup,
  pgWorkersSetup,
} from './postgres-cases.js'
import {
  cpuSeconds,
  installCleanup,
  makeTempRoot,
  rssMb,
  SERVICE_BENCH_ENV,
  type Server,
  startServer,
  stopServer,
  track,
} from './procs.js'
import { type SeededUser, seedDataDir } from './seed.js'
import { makeToken } from './token.js'
import { ensureWrk, luaHeaders, luaString, runWrk, type WrkResult } from './wrk.js'

const BENCH_DIR = dirname(fileURLToPath(import.meta.url))
const ROOT = resolve(BENCH_DIR, '..', '..')
const MAIN = join(ROOT, 'dist', 'main.js')
const REFERENCE = join(BENCH_DIR, 'reference-server.ts')
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
const CONNECTIONS = 16
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

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  const hi = sorted[mid] ?? Number.NaN
  if (sorted.length % 2 === 1) return hi
  return ((sorted[mid - 1] ?? Number.NaN) + hi) / 2
}

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

interface StartSample {
  users: number
  startMs: number
  rssMb: number
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
 * Seeds a fresh data dir with `users` users, starts dist/main.js on it and waits for /readyz.
 * With `sample`, waits 1 s once ready and records start-up time and RSS.
 */
const startService = async (users: number, sample = false): Promise<Service> => {
  const dataDir = await newDir('data')
  const seedStart = performance.now()
  const seeded = await seedDataDir(dataDir, users)
  await syncFs(dataDir)
  if (users > 0)
    log(`  seeded ${users} users in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`)
  const server = await closingOnError(
    () => rm(dataDir, { recursive: true, force: true }),
    () =>
      startServer({
        name: 'service',
        command: process.execPath,
        args: [MAIN],
        cwd: ROOT,
        env: {
          ...process.env,
          PORT: '0',
          HOST: '127.0.0.1',
          DATA_DIR: dataDir,
          JWT_SECRET: SECRET,
          // The file store, even when DATABASE_URL is set for the PostgreSQL cases.
          DATABASE_URL: undefined,
          WORKERS: undefined,
          ...SERVICE_BENCH_ENV,
        },
        readyz: true,
        timeoutMs: 120_000,
      }),
  )
  const service = { server, dataDir, users: seeded }
  if (sample) {
    await sleep(1000)
    const rss = rssMb(server.pid)
    startSamples.push({ users, startMs: server.startMs, rssMb: rss })
    log(
      `  service with ${users} users: ready in ${server.startMs.toFixed(0)} ms, RSS ${rss.toFixed(1)} MB`,
    )
  }
  return service
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
      '--import',
      'tsx',
      REFERENCE,
      mode,
      ...(dir === undefined ? [] : [files > 0 ? join(dir, 'users') : dir]),
    ],
    cwd: ROOT,
    readyz: false,
  })
  return { server, dir }
}

/** The auth reference over a service's data directory (read only: it loads the user files). */
const startAuthReference = async (dataDir: string): Promise<Server> =>
  startServer({
    name: 'auth reference',
    command: process.execPath,
    args: ['--import', 'tsx', REFERENCE, 'auth', dataDir],
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

// ---------------------------------------------------------------------------
// Lua scripts (one wrk thread; requests are prebuilt in init where possible)

const staticGetScript = (path: string): string => `
wrk.method = "GET"
wrk.path = ${luaString(path)}
wrk.headers["Authorization"] = ${luaString(AUTH)}
`

/**
 * A Lua script that builds one request per entry of `items` (a Lua table literal body) once, in
 * init, with `format` (a Lua expression over `it`, the entry), then sends them round-robin.
 */
const roundRobinScript = (items: string, format: string): string => `
local items = {
${items}
}
local reqs = {}
local n = #items
local i = 0
init = function(args)
  for k = 1, n do
    local it = items[k]
    reqs[k] = ${format}
  end
end
request = function()
  i = i % n + 1
  return reqs[i]
end
`

const getByIdScript = (ids: string[]): string =>
  roundRobinScript(
    ids.map((id) => `  ${luaString(id)},`).join('\n'),
    `wrk.format("GET", "/users/" .. it, { ["Authorization"] = ${luaString(AUTH)} })`,
  )

const postScript = (): string => {
  const prefix = randomBytes(4).toString('hex')
  return `
local prefix = ${luaString(prefix)}
local counter = 0
request = function()
  counter = counter + 1
  local body = '{"email":"b' .. prefix .. '-' .. counter .. '@bench.example.com","name":"Bench"}'
  local headers = { ["Authorization"] = ${luaString(AUTH)}, ["Content-Type"] = "application/json" }
  return wrk.format("POST", "/users", headers, body)
end
`
}

interface PatchTarget {
  id: string
  etag: string
  name: string
}

const patchScript = (targets: PatchTarget[]): string =>
  roundRobinScript(
    targets
      .map((t) => `  { ${luaString(t.id)}, ${luaString(t.etag)}, ${luaString(nameBody(t.name))} },`)
      .join('\n'),
    `wrk.format("PATCH", "/users/" .. it[1], { ["Authorization"] = ${luaString(AUTH)}, ` +
      `["Content-Type"] = "application/merge-patch+json", ["If-Match"] = it[2] }, it[3])`,
  )

/**
 * PATCH that really changes each user: the name flips between its seeded value and a variant,
 * so every request bumps the version and writes the file. The new ETag is taken from each
 * response (users are visited round-robin, so a user's response is back long before its next
 * request). ETags only live for one wrk process: the script is rebuilt from fresh ETags per run.
 */
const changingPatchScript = (targets: PatchTarget[]): string => `
local targets = {
${targets.map((t) => `  { ${luaString(t.id)}, ${luaString(t.etag)}, ${luaString(nameBody(t.name))}, ${luaString(nameBody(flipName(t.name)))} },`).join('\n')}
}
local etags = {}
for k = 1, #targets do etags[targets[k][1]] = targets[k][2] end
local n = #targets
local i = 0
request = function()
  i = i % n + 1
  local t = targets[i]
  t[3], t[4] = t[4], t[3]
  local headers = ${luaHeaders({ Authorization: AUTH, 'Content-Type': 'application/merge-patch+json' })}
  headers["If-Match"] = etags[t[1]]
  return wrk.format("PATCH", "/users/" .. t[1], headers, t[3])
end
response = function(status, headers, body)
  local etag = headers["etag"] or headers["ETag"]
  local id = string.match(body, '"id":"([^"]+)"')
  if etag ~= nil and id ~= nil and etags[id] ~= nil then etags[id] = etag end
end
`

const nameBody = (name: string): string => JSON.stringify({ name })

const FLIP_SUFFIX = ' (patched)'
const flipName = (name: string): string =>
  name.endsWith(FLIP_SUFFIX) ? name.slice(0, -FLIP_SUFFIX.length) : `${name}${FLIP_SUFFIX}`

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
  close: () => Promise<void>
}

/** One wrk run and the CPU the server used for it. */
interface Run extends WrkResult {
  /** Server CPU time (user + system) per request, in µs. */
  cpuUsPerReq: number
}

interface Summary {
  rps: number
  cpuUsPerReq: number
  p50Ms: number
  p99Ms: number
  errors: number
}

interface CaseResult {
  key: string
  label: string
  users: number
  service: Summary
  reference: Summary
  ratio: number
  authReference?: Summary
  /** service rps / auth reference rps. */
  authRatio?: number
  runs: { service: Run[]; reference: Run[]; authReference: Run[] }
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
  const before = cpuSeconds(target.pid)
  const result = await runWrk({
    url: target.url,
    script,
    tmpDir: tempRoot,
    durationS,
    connections: CONNECTIONS,
  })
  const used = cpuSeconds(target.pid) - before
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
  const svc: Run[] = []
  const ref: Run[] = []
  const auth: Run[] = []
  let current: CaseSetup | undefined
  try {
    for (let run = 0; run < RUNS; run++) {
      if (current === undefined) {
        current = await setup()
        await wrk(current.service, WARMUP_S)
        await wrk(current.reference, WARMUP_S)
        if (current.authReference !== undefined) await wrk(current.authReference, WARMUP_S)
      }
      const all = ['service', 'reference', 'authReference'] as const
      const order = run % 2 === 0 ? all : [...all].reverse()
      for (const which of order) {
        const target = current[which]
        if (target === undefined) continue
        const result = await wrk(target, DURATION_S)
        if (which === 'service') svc.push(result)
        else if (which === 'reference') ref.push(result)
        else auth.push(result)
        log(`  run ${run + 1}/${RUNS} ${which.padEnd(13)} ${fmtRun(result)}`)
      }
      if (freshPerRun) {
        await current.close()
        current = undefined
      }
    }
  } finally {
    if (current !== undefined) await current.close()
  }
  const service = summarize(svc)
  const reference = summarize(ref)
  const authReference = auth.length === 0 ? undefined : summarize(auth)
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
    runs: { service: svc, reference: ref, authReference: auth },
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
    const close = async (): Promise<void> => {
      await stopServer(authRef)
      await stopService(service)
    }
    return closingOnError(close, async () => {
      const first = service.users[0]
      if (first === undefined) throw new Error('no seeded users')
      for (const url of [service.server.url, authRef.url]) {
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
        close,
      }
    })
  })

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
    const service = await startService(users, users === LARGE)
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

const postCase = (users: number): Promise<CaseResult> =>
  runCase(`post-${users}`, 'POST /users', users, true, async () => {
    const service = await startService(users, users === LARGE)
    const writeRef = await closingOnError(
      () => stopService(service),
      () => startReference('write', users),
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

/** Starts the service on an empty data dir RUNS times (start-up with users is sampled in the cases). */
const idleStartCase = async (): Promise<void> => {
  log('\n== start-up and RSS, empty data dir')
  for (let run = 0; run < RUNS; run++) {
    await stopService(await startService(0, true))
  }
}

// ---------------------------------------------------------------------------
// Report

interface Row {
  case: string
  users: number | null
  serviceRps: number | null
  referenceRps: number | null
  ratio: string
  p50Ms: number | null
  p99Ms: number | null
  /** Server CPU per request (µs), service and reference. */
  serviceCpuUs: number | null
  referenceCpuUs: number | null
  errors: number
  target: string
  result: 'PASS' | 'FAIL' | 'info' | 'ERRORS' | 'ERROR'
}

const verdict = (pass: boolean | null, errors: number): Row['result'] => {
  if (pass === null) return errors > 0 ? 'ERRORS' : 'info'
  return pass && errors === 0 ? 'PASS' : 'FAIL'
}

const caseRow = (c: CaseResult, target: string, pass: boolean | null): Row => ({
  case: c.label,
  users: c.users,
  serviceRps: c.service.rps,
  referenceRps: c.reference.rps,
  ratio: `${c.ratio.toFixed(2)}x`,
  p50Ms: c.service.p50Ms,
  p99Ms: c.service.p99Ms,
  serviceCpuUs: c.service.cpuUsPerReq,
  referenceCpuUs: c.reference.cpuUsPerReq,
  errors: c.service.errors + c.reference.errors,
  target,
  result: verdict(pass, c.service.errors + c.reference.errors),
})

const valueRow = (
  label: string,
  users: number | null,
  value: string,
  target: string,
  pass: boolean | null,
  errors = 0,
): Row => ({
  case: label,
  users,
  serviceRps: null,
  referenceRps: null,
  ratio: value,
  p50Ms: null,
  p99Ms: null,
  serviceCpuUs: null,
  referenceCpuUs: null,
  errors,
  target,
  result: verdict(pass, errors),
})

const errorRow = (label: string, users: number | null, message: string): Row => ({
  case: label,
  users,
  serviceRps: null,
  referenceRps: null,
  ratio: '-',
  p50Ms: null,
  p99Ms: null,
  serviceCpuUs: null,
  referenceCpuUs: null,
  errors: 0,
  target: message.split('\n')[0]?.slice(0, 60) ?? 'error',
  result: 'ERROR',
})

const fmtUsers = (n: number | null): string => {
  if (n === null) return '-'
  return n >= 1000 && n % 1000 === 0 ? `${n / 1000}k` : String(n)
}
const fmtNum = (n: number | null, digits: number): string => (n === null ? '-' : n.toFixed(digits))

const renderTable = (rows: Row[]): string => {
  const header = [
    'case',
    'users',
    'svc rps',
    'ref rps',
    'ratio',
    'svc µs/req',
    'ref µs/req',
    'p50 ms',
    'p99 ms',
    'errors',
    'target',
    'result',
  ]
  const cells = rows.map((r) => [
    r.case,
    fmtUsers(r.users),
    fmtNum(r.serviceRps, 0),
    fmtNum(r.referenceRps, 0),
    r.ratio,
    fmtNum(r.serviceCpuUs, 1),
    fmtNum(r.referenceCpuUs, 1),
    fmtNum(r.p50Ms, 2),
    fmtNum(r.p99Ms, 2),
    String(r.errors),
    r.target,
    r.result,
  ])
  const widths = header.map((h, i) =>
    Math.max(h.length, ...cells.map((row) => (row[i] ?? '').length)),
  )
  const left = new Set([0, 10, 11])
  const line = (row: string[]): string =>
    row
      .map((cell, i) => (left.has(i) ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)))
      .join('  ')
      .trimEnd()
  const rule = widths.map((w) => '-'.repeat(w)).join('  ')
  return [line(header), rule, ...cells.map(line)].join('\n')
}

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
  log(
    `bench: ${RUNS} run(s) of ${DURATION_S} s per case and server, wrk -t1 -c${CONNECTIONS}, temp ${tempRoot}`,
  )
  if ((loadAtStart[0] ?? 0) > cpus().length / 2) {
    log(
      `warning: load average ${loadAtStart.map((x) => x.toFixed(2)).join(' ')} on ${cpus().length} cores; figures will be noisy`,
    )
  }

  readRef = await startReference('read')
  const rows: Row[] = []
  const cases: CaseResult[] = []
  const failures: { case: string; error: string }[] = []

  const attempt = async <T>(
    label: string,
    users: number | null,
    fn: () => Promise<T>,
  ): Promise<T | undefined> => {
    if (ONLY !== undefined && !ONLY.some((wanted) => selects(wanted, label, users)))
      return undefined
    try {
      return await fn()
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err)
      log(`  ERROR in ${label}: ${message}`)
      failures.push({ case: label, error: message })
      rows.push(errorRow(label, users, message))
      return undefined
    }
  }

  const getById = await attempt('GET /users/{id}', MEDIUM, () => getByIdCase(MEDIUM))
  if (getById !== undefined) {
    cases.push(getById)
    rows.push(caseRow(getById, '>= 0.60x read ref', getById.ratio >= 0.6))
    if (getById.authReference !== undefined && getById.authRatio !== undefined) {
      rows.push({
        ...caseRow(getById, '>= 0.80x auth ref', getById.authRatio >= 0.8),
        case: 'GET /users/{id} vs auth ref',
        referenceRps: getById.authReference.rps,
        referenceCpuUs: getById.authReference.cpuUsPerReq,
        ratio: `${getById.authRatio.toFixed(2)}x`,
        errors: getById.service.errors + getById.authReference.errors,
        result: verdict(
          getById.authRatio >= 0.8,
          getById.service.errors + getById.authReference.errors,
        ),
      })
    }
  }

  const list1k = await attempt('GET /users?limit=100', SMALL, () => listCase(SMALL))
  const list100k = await attempt('GET /users?limit=100', LARGE, () => listCase(LARGE))
  for (const c of [list1k, list100k]) {
    if (c === undefined) continue
    cases.push(c)
    rows.push(caseRow(c, 'vs read ref (info)', null))
  }
  if (list1k !== undefined && list100k !== undefined) {
    const cost = list1k.service.rps / list100k.service.rps
    rows.push(
      valueRow(
        'GET /users?limit=100 cost 100k/1k',
        null,
        `${cost.toFixed(2)}x`,
        '<= 1.50x',
        cost <= 1.5,
        list1k.service.errors + list100k.service.errors,
      ),
    )
  }

  const post1k = await attempt('POST /users', SMALL, () => postCase(SMALL))
  const post100k = await attempt('POST /users', LARGE, () => postCase(LARGE))
  for (const c of [post1k, post100k]) {
    if (c === undefined) continue
    cases.push(c)
    rows.push(caseRow(c, '>= 0.70x write ref', c.ratio >= 0.7))
  }
  if (post1k !== undefined && post100k !== undefined) {
    const scale = post100k.service.rps / post1k.service.rps
    rows.push(
      valueRow(
        'POST /users rps 100k/1k',
        null,
        `${scale.toFixed(2)}x`,
        '>= 0.80x',
        scale >= 0.8,
        post1k.service.errors + post100k.service.errors,
      ),
    )
  }

  for (const changing of [false, true]) {
    const label = `PATCH /users/{id} (${changing ? 'change' : 'no-op'})`
    const patch = await attempt(label, MEDIUM, () => patchCase(MEDIUM, changing))
    if (patch !== undefined) {
      cases.push(patch)
      rows.push(caseRow(patch, 'vs write ref (info)', null))
    }
  }

  if (POSTGRES_URL === undefined) {
    log(
      '\n== PostgreSQL cases skipped: DATABASE_URL is not set (scripts/with-postgres.sh npm run bench)',
    )
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
    const pgCases = [
      {
        key: 'pg-get-by-id',
        label: 'PostgreSQL GET /users/{id}',
        target: 'vs pg ref (info)',
        setup: pgGetSetup,
        fresh: false,
      },
      {
        key: 'pg-post',
        label: 'PostgreSQL POST /users',
        target: 'vs pg ref (info)',
        setup: pgPostSetup,
        fresh: true,
      },
      {
        key: 'pg-workers',
        label: 'PostgreSQL GET /users/{id} WORKERS=2 vs 1',
        target: 'ref = WORKERS=1 (info)',
        setup: pgWorkersSetup,
        fresh: false,
      },
    ]
    for (const pgCase of pgCases) {
      const result = await attempt(pgCase.label, MEDIUM, () =>
        runCase(pgCase.key, pgCase.label, MEDIUM, pgCase.fresh, () =>
          pgCase.setup(pgContext, MEDIUM),
        ),
      )
      if (result !== undefined) {
        cases.push(result)
        rows.push(caseRow(result, pgCase.target, null))
      }
    }
  }

  const scrape100k = scrapeMs[`list-${LARGE}`]
  if (scrape100k !== undefined) {
    rows.push(
      valueRow(
        'GET /metrics (median of 21)',
        LARGE,
        `${scrape100k.toFixed(2)} ms`,
        '< 5 ms',
        scrape100k < 5,
      ),
    )
  }

  await attempt('start-up / RSS', 0, idleStartCase)
  const samplesFor = (users: number): StartSample[] => startSamples.filter((x) => x.users === users)
  const idle = samplesFor(0)
  const loaded = samplesFor(LARGE)
  if (idle.length > 0) {
    const startIdle = median(idle.map((x) => x.startMs)) / 1000
    const rssIdle = median(idle.map((x) => x.rssMb))
    rows.push(valueRow('start-up', 0, `${startIdle.toFixed(2)} s`, '(info)', null))
    rows.push(valueRow('RSS idle', 0, `${rssIdle.toFixed(1)} MB`, '< 60 MB', rssIdle < 60))
  }
  if (loaded.length > 0) {
    const start100k = median(loaded.map((x) => x.startMs)) / 1000
    const rss100k = median(loaded.map((x) => x.rssMb))
    rows.push(valueRow('start-up', LARGE, `${start100k.toFixed(2)} s`, '< 3 s', start100k < 3))
    rows.push(
      valueRow('RSS after load', LARGE, `${rss100k.toFixed(1)} MB`, '< 250 MB', rss100k < 250),
    )
  } else {
    rows.push(errorRow('start-up / RSS', LARGE, 'no service start with 100k users succeeded'))
  }

  await stopReference(readRef)

  const table = renderTable(rows)
  process.stdout.write(`\n${table}\n`)
  const targets = rows.filter((r) => r.result === 'PASS' || r.result === 'FAIL')
  const passed = targets.filter((r) => r.result === 'PASS').length
  const flagged = rows.filter((r) => r.result === 'ERRORS' || r.result === 'ERROR').length
  process.stdout.write(
    `\n${passed}/${targets.length} targets passed` +
      `${flagged > 0 ? `, ${flagged} row(s) with errors` : ''}` +
      ' (errors = non-2xx responses + socket errors, service and reference; a row with errors does not pass)\n',
  )

  const cpu = cpus()
  const report = {
    date: startedAt.toISOString(),
    machine: {
      cpu: cpu[0]?.model ?? 'unknown',
      cores: cpu.length,
      totalMemMb: Math.round(totalmem() / 1024 / 1024),
      os: `${platform()} ${release()}`,
      node: process.version,
      loadAvgStart: loadAtStart,
      loadAvgEnd: loadavg(),
    },
    config: {
      durationS: DURATION_S,
      runs: RUNS,
      connections: CONNECTIONS,
      threads: 1,
      warmupS: WARMUP_S,
    },
    table: rows,
    cases,
    startSamples,
    rssAfterLoadMb: rssAfterLoad,
    metricsScrapeMs: scrapeMs,
    failures,
  }
  await mkdir(dirname(RESULTS), { recursive: true })
  await writeFile(RESULTS, `${JSON.stringify(report, null, 2)}\n`)
  log(`\nresults written to ${RESULTS}`)
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(
      `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    )
    process.exit(1)
  },
)
