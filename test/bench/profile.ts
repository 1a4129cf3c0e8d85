// Where the microseconds of GET /users/{id} go: `node --import tsx test/bench/profile.ts` (after
// `npm run build`). Not a unit test. Seeds PROFILE_USERS users (default 10,000), starts
// dist/bin.js under `node --cpu-prof` the way the bench does (LOG_LEVEL=info, METRICS=on), loads
// it with wrk (-t1 -c16, PROFILE_DURATION_S seconds, default 10, after a 2 s warm-up), stops it,
// and prints the samples taken while wrk ran, per request: by function (self time) and by source
// file. PROFILE_LOG_LEVEL and PROFILE_METRICS override the service's LOG_LEVEL and METRICS.
// PROFILE_TARGET=auth profiles the bench's auth reference instead (reference-server.ts).
// PROFILE_OUT=<file> copies the .cpuprofile there (for Chrome's DevTools), or perf.data. PROFILE_PERF=1 records
// with Linux perf instead (user and kernel CPU, `--perf-basic-prof` for JavaScript's names; needs
// perf and permission to record the process), printing PROFILE_SYMBOLS symbols (default 40).
// PROFILE_DIST=<dir> profiles another build of the service (a copy of dist/ made before a change).
// PROFILE_STRACE=1 counts the system calls per request instead (strace -c; it slows the server).
// PROFILE_STORE=postgres (with DATABASE_URL, e.g. under scripts/with-postgres.sh) runs the service
// on a fresh database of that server, seeded like the bench's PostgreSQL cases (the wrk script
// reads the first 1,000 users, as theirs does); PROFILE_TARGET=pg-reference then profiles the
// bare `pg` reference (postgres-reference.ts get) on the same database instead.
// PROFILE_SUBJECT=user signs the token for the first seeded user, so that every request also
// checks its subject (docs/api.md); by default the token's subject is not a user id.

import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { copyFile, readdir, readFile } from 'node:fs/promises'
import { join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { compiledReference } from './compile.js'
import type { CallFrame, CpuProfile } from './cpu-profile.js'
import { getById } from './lua-scripts.js'
import { createDatabase, seedDatabase } from './postgres-cases.js'
import {
  benchServiceEnv,
  cpuSeconds,
  installCleanup,
  makeTempRoot,
  SERVICE_BENCH_ENV,
  type Server,
  startServer,
  stopServer,
  track,
} from './procs.js'
import { type SeededUser, seedDataDir } from './seed.js'
import { makeToken } from './token.js'
import { runWrk } from './wrk.js'

const ROOT = resolve(fileURLToPath(import.meta.url), '..', '..', '..')
const USERS = Number(process.env['PROFILE_USERS'] ?? '10000')
const DURATION_S = Number(process.env['PROFILE_DURATION_S'] ?? '10')
const OUT = process.env['PROFILE_OUT']
const DIST = resolve(process.env['PROFILE_DIST'] ?? join(ROOT, 'dist'))
const SECRET = randomBytes(24).toString('hex')
const AUTH = `Bearer ${makeToken(SECRET)}`

const PERF_HZ = 4999

/** `perf record` of one process's CPU (user and kernel, with call graphs) for `seconds`. */
async function perfRecord(pid: number, out: string, seconds: number): Promise<void> {
  const child = track(
    spawn(
      'perf',
      [
        'record',
        '-q',
        '-e',
        'cpu-clock',
        '-F',
        String(PERF_HZ),
        '-g',
        '-p',
        String(pid),
        '-o',
        out,
        '--',
        'sleep',
        String(seconds),
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    ),
  )
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', resolve)
  })
  if (code !== 0) throw new Error(`perf record exited with ${String(code)}`)
}

/** The samples by kind and by symbol (self), as µs per request; `[k]` marks the kernel's. */
async function perfReport(data: string, requests: number): Promise<string> {
  const report = (children: boolean): Promise<string> =>
    new Promise<string>((resolve, reject) => {
      const args = ['report', '-i', data, '--stdio', '-g', 'none', '-n', '--sort', 'dso,sym']
      const child = track(
        spawn('perf', [...args, children ? '--children' : '--no-children'], {
          stdio: ['ignore', 'pipe', 'ignore'],
        }),
      )
      let text = ''
      child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk
      })
      child.on('error', reject)
      child.on('close', () => resolve(text))
    })
  const out = await report(false)
  // With --children a line reads: children% self% samples dso [.] symbol.
  const inclusive: [string, number][] = []
  for (const line of (await report(true)).split('\n')) {
    const match = /^\s+([\d.]+)%\s+[\d.]+%\s+\d+\s+.+?\s+\[.\]\s+(.*)$/.exec(line)
    const [, percent = '', symbol = ''] = match ?? []
    // The service's functions, and the system calls' libc entries (the kernel's work below them).
    if (
      /dist\/|src\/|^(__)?(GI___)?(libc_)?(writev|write|read|recvmsg)$|epoll_pwait/.test(
        symbol.trim(),
      )
    )
      inclusive.push([symbol.trim(), Number(percent)])
  }
  const perSample = 1e6 / PERF_HZ / requests
  const kinds = new Map<string, number>()
  const rows: string[] = []
  for (const line of out.split('\n')) {
    const match = /^\s+([\d.]+)%\s+(\d+)\s+(.+?)\s+\[(.)\]\s+(.*)$/.exec(line)
    if (match === null) continue
    const [, percent = '', samples = '', dso = '', mark = '', symbol = ''] = match
    const us = Number(samples) * perSample
    const kind =
      mark === 'k'
        ? 'kernel'
        : /dist\/|src\//.test(symbol)
          ? "the service's JavaScript"
          : symbol.startsWith('JS:') || symbol.startsWith('RegExp:')
            ? "Node's JavaScript (node:http, streams) and regular expressions"
            : `native: ${dso}`
    kinds.set(kind, (kinds.get(kind) ?? 0) + us)
    if (rows.length < Number(process.env['PROFILE_SYMBOLS'] ?? '40'))
      rows.push(
        `${us.toFixed(2).padStart(7)} µs  ${percent.padStart(5)}%  [${mark}] ${symbol.trim()}`,
      )
  }
  const total = [...kinds.values()].reduce((sum, us) => sum + us, 0)
  return [
    `perf record -e cpu-clock -F ${PERF_HZ}: ${total.toFixed(2)} µs of CPU per request, by kind:`,
    ...[...kinds]
      .sort((a, b) => b[1] - a[1])
      .map(([kind, us]) => `${us.toFixed(2).padStart(7)} µs  ${kind}`),
    '',
    'by symbol (self):',
    ...rows,
    '',
    "inclusive (what they call, Node and the kernel included; inlined callees count in their caller): the service's functions and libc's system call entries",
    ...inclusive
      .slice(0, 30)
      .map(
        ([symbol, percent]) =>
          `${((percent / 100) * total).toFixed(2).padStart(7)} µs  ${percent.toFixed(2).padStart(5)}%  ${symbol}`,
      ),
  ].join('\n')
}

const describeLoad = (
  load: { rps: number; requests: number; p99Ms: number },
  cpuUs: number,
): string =>
  `GET /users/{id}, ${USERS} users, wrk -t1 -c16 ${DURATION_S} s: ${load.rps.toFixed(0)} rps, ${load.requests} requests, p99 ${load.p99Ms.toFixed(2)} ms\n` +
  `process CPU (user + system, /proc): ${(cpuUs / load.requests).toFixed(2)} µs/request`

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n)

/** A short name for a script: a path under the project, `node:` for Node's own, or the URL. */
const shortFile = (url: string): string => {
  if (url === '') return '(native)'
  if (url.startsWith('node:')) return url
  const path = url.startsWith('file://') ? fileURLToPath(url) : url
  if (path.startsWith(DIST)) return join('dist', relative(DIST, path))
  return path.startsWith(ROOT) ? relative(ROOT, path) : path
}

installCleanup()
const temp = makeTempRoot()
const dataDir = join(temp, 'data')
const profDir = join(temp, 'prof')
const POSTGRES = process.env['PROFILE_STORE'] === 'postgres'
const REFERENCE = process.env['PROFILE_TARGET'] === 'auth'
const PG_REFERENCE = process.env['PROFILE_TARGET'] === 'pg-reference'
if (PG_REFERENCE && !POSTGRES)
  throw new Error('PROFILE_TARGET=pg-reference needs PROFILE_STORE=postgres')
const PERF = process.env['PROFILE_PERF'] === '1'
const STRACE = process.env['PROFILE_STRACE'] === '1'
const profiler = PERF
  ? ['--perf-basic-prof']
  : STRACE
    ? []
    : ['--cpu-prof', '--cpu-prof-dir', profDir]
const serviceEnv = (extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv =>
  benchServiceEnv(SECRET, dataDir, {
    LOG_LEVEL: process.env['PROFILE_LOG_LEVEL'] ?? SERVICE_BENCH_ENV.LOG_LEVEL,
    METRICS: process.env['PROFILE_METRICS'] ?? SERVICE_BENCH_ENV.METRICS,
    ...extra,
  })

/** Drops the PostgreSQL case's database once the profiled server has stopped. */
let dropDatabase = async (): Promise<void> => undefined

/** The service (or the pg reference) on a fresh database that the service migrated, seeded. */
const startOnPostgres = async (): Promise<{ server: Server; users: SeededUser[] }> => {
  const db = await createDatabase()
  dropDatabase = db.drop
  // The service migrates the database at start: the reference needs its tables too.
  const service = await startServer({
    name: 'service (PostgreSQL)',
    command: process.execPath,
    args: [...(PG_REFERENCE ? [] : profiler), join(DIST, 'bin.js')],
    cwd: ROOT,
    env: serviceEnv({ DATABASE_URL: db.url }),
    readyz: true,
    timeoutMs: 120_000,
  })
  const seeded = await seedDatabase(db.url, USERS)
  if (!PG_REFERENCE) return { server: service, users: seeded.slice(0, 1000) }
  await stopServer(service)
  const reference = await startServer({
    name: 'PostgreSQL get reference',
    command: process.execPath,
    args: [...profiler, compiledReference('postgres-reference'), 'get'],
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: db.url },
    readyz: false,
  })
  return { server: reference, users: seeded.slice(0, 1000) }
}

const startOnFiles = async (): Promise<{ server: Server; users: SeededUser[] }> => {
  const users = await seedDataDir(dataDir, USERS)
  const server = await startServer({
    name: REFERENCE ? 'auth reference' : 'service',
    command: process.execPath,
    args: [
      ...profiler,
      ...(REFERENCE
        ? [compiledReference('reference-server'), 'auth', dataDir]
        : [join(DIST, 'bin.js')]),
    ],
    cwd: ROOT,
    env: serviceEnv({}),
    readyz: !REFERENCE,
    timeoutMs: 120_000,
  })
  return { server, users }
}

const { server, users } = POSTGRES ? await startOnPostgres() : await startOnFiles()
const subject = process.env['PROFILE_SUBJECT'] === 'user' ? users[0]?.id : undefined
const script = getById(
  subject === undefined ? AUTH : `Bearer ${makeToken(SECRET, undefined, undefined, subject)}`,
  users.map((u) => u.id),
)
const wrkOptions = { url: server.url, script, tmpDir: temp, connections: 16 }
await runWrk({ ...wrkOptions, durationS: 2 })
const from = nowUs()
const cpuBefore = cpuSeconds(server.pid)
const perfData = join(temp, 'perf.data')
const recording = PERF ? perfRecord(server.pid, perfData, DURATION_S) : Promise.resolve()
const traceFile = join(temp, 'strace.txt')
const tracer = STRACE
  ? track(
      spawn('strace', ['-c', '-f', '-p', String(server.pid), '-o', traceFile], { stdio: 'ignore' }),
    )
  : undefined
const load = await runWrk({ ...wrkOptions, durationS: DURATION_S })
const cpuUs = (cpuSeconds(server.pid) - cpuBefore) * 1e6
const to = nowUs()
await recording
if (tracer !== undefined) {
  const exited = new Promise((resolve) => tracer.once('close', resolve))
  tracer.kill('SIGINT')
  await exited
}
await stopServer(server)
await dropDatabase()
if (STRACE) {
  // strace -c: % time, seconds, usecs/call, calls, errors, syscall.
  const lines = (await readFile(traceFile, 'utf8')).split('\n')
  const rows = lines.flatMap((line) => {
    const fields = line.trim().split(/\s+/)
    const calls = Number(fields[3])
    const name = fields.at(-1) ?? ''
    if (fields.length < 5 || !Number.isFinite(calls) || name === 'total') return []
    return [`${(calls / load.requests).toFixed(3).padStart(8)}  ${name}`]
  })
  process.stdout.write(
    `${describeLoad(load, cpuUs)} (slowed by strace)\n\nsystem calls per request:\n${rows.join('\n')}\n`,
  )
  process.exit(0)
}
if (PERF) {
  if (OUT !== undefined) await copyFile(perfData, OUT)
  process.stdout.write(
    `${describeLoad(load, cpuUs)}\n\n${await perfReport(perfData, load.requests)}\n`,
  )
  process.exit(0)
}

const file = (await readdir(profDir)).find((name) => name.endsWith('.cpuprofile'))
if (file === undefined) throw new Error(`no .cpuprofile in ${profDir}`)
const profile = JSON.parse(await readFile(join(profDir, file), 'utf8')) as CpuProfile

const byId = new Map(profile.nodes.map((node) => [node.id, node]))
const parent = new Map<number, number>()
for (const node of profile.nodes)
  for (const child of node.children ?? []) parent.set(child, node.id)

// Self time per node, counting only the samples taken while wrk ran (V8's clock is the same
// monotonic clock as process.hrtime). A sample's time is the delta to the next one.
const self = new Map<number, number>()
let at = profile.startTime
let windowUs = 0
for (let i = 0; i < profile.samples.length; i += 1) {
  at += profile.timeDeltas[i] ?? 0
  const spent = profile.timeDeltas[i + 1] ?? 0
  const id = profile.samples[i]
  if (id === undefined || at < from || at > to) continue
  self.set(id, (self.get(id) ?? 0) + spent)
  windowUs += spent
}

const key = (frame: CallFrame): string =>
  `${frame.functionName || '(anonymous)'} ${shortFile(frame.url)}${frame.url === '' ? '' : `:${frame.lineNumber + 1}`}`
const selfByFunction = new Map<string, number>()
const selfByFile = new Map<string, number>()
const inclusiveByFunction = new Map<string, number>()
for (const [id, us] of self) {
  const node = byId.get(id)
  if (node === undefined) continue
  const frame = node.callFrame
  selfByFunction.set(key(frame), (selfByFunction.get(key(frame)) ?? 0) + us)
  const where = frame.url === '' ? frame.functionName : shortFile(frame.url)
  selfByFile.set(where, (selfByFile.get(where) ?? 0) + us)
  // Inclusive: every distinct function on the stack of this sample gets its time once.
  const seen = new Set<string>()
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const up = byId.get(cur)
    if (up === undefined) break
    const k = key(up.callFrame)
    if (seen.has(k)) continue
    seen.add(k)
    inclusiveByFunction.set(k, (inclusiveByFunction.get(k) ?? 0) + us)
  }
}

// Each sample charged to one owner: a system call by name, else the innermost function of the
// service's own code on the stack (what it calls in Node included), else Node's code alone.
const SYSCALLS: Record<string, string> = {
  writev: 'writev (the answer, kernel)',
  writeBuffer: 'writeBuffer (a log batch to stdout, kernel)',
  writeUtf8String: 'writeUtf8String (kernel)',
}
const ownerOf = (id: number): string => {
  const leaf = byId.get(id)
  if (leaf === undefined) return '?'
  const name = leaf.callFrame.functionName
  if (leaf.callFrame.url === '' && SYSCALLS[name] !== undefined) return SYSCALLS[name] ?? name
  if (leaf.callFrame.url === '' && name.startsWith('(')) return name
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const frame = byId.get(cur)?.callFrame
    if (frame === undefined) break
    const where = shortFile(frame.url)
    if (where.startsWith('dist/') || where.startsWith('src/')) return key(frame)
  }
  return 'Node alone (HTTP parser, streams, timers)'
}
const byOwner = new Map<string, number>()
for (const [id, us] of self) {
  const owner = ownerOf(id)
  byOwner.set(owner, (byOwner.get(owner) ?? 0) + us)
}

const requests = load.requests
const perReq = (us: number): string => (us / requests).toFixed(2).padStart(7)
const top = (map: Map<string, number>, n: number): string[] =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(
      ([name, us]) =>
        `${perReq(us)} µs  ${((100 * us) / windowUs).toFixed(1).padStart(5)}%  ${name}`,
    )

const idle = selfByFunction.get('(idle) (native)') ?? 0
process.stdout.write(
  [
    `GET /users/{id}, ${USERS} users, wrk -t1 -c16 ${DURATION_S} s: ${load.rps.toFixed(0)} rps, ${requests} requests, p99 ${load.p99Ms.toFixed(2)} ms`,
    `process CPU (user + system, /proc): ${perReq(cpuUs)} µs/request`,
    `profiled ${(windowUs / 1e3).toFixed(0)} ms of the main thread, ${perReq(windowUs - idle)} µs/request not idle`,
    '',
    'by owner (a system call, else the innermost service function on the stack, with what it calls in Node):',
    ...top(byOwner, 30),
    '',
    'self time by file, µs per request:',
    ...top(selfByFile, 25),
    '',
    'self time by function:',
    ...top(selfByFunction, 40),
    '',
    'inclusive time by function:',
    ...top(inclusiveByFunction, 60),
    '',
  ].join('\n'),
)
if (OUT !== undefined) {
  await copyFile(join(profDir, file), OUT)
  process.stdout.write(`profile written to ${OUT}\n`)
}
