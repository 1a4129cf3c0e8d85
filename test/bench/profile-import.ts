// Where the time of POST /users:import goes: `node --import tsx test/bench/profile-import.ts`
// (after `npm run build`). Not a unit test. Starts dist/bin.js under `node --cpu-prof` the way the
// bench does (LOG_LEVEL=info, METRICS=on) on a fresh data directory, imports PROFILE_USERS new
// users (default 20,000) in one request as the bench's import row does, then waits for the
// checkpoint to have made every file durable (PROFILE_SETTLE_MS, default 3000), stops it, and
// prints the import's rate, the process's CPU, and the main thread's samples taken during the
// import and after it: by file and by function (self time), idle included.
// PROFILE_DIST=<dir> profiles another build (a copy of dist/ made before a change);
// PROFILE_OUT=<file> copies the .cpuprofile there.

import { randomBytes } from 'node:crypto'
import { copyFile, readdir, readFile } from 'node:fs/promises'
import { join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import type { CallFrame, CpuProfile } from './cpu-profile.js'
import { importUsers } from './import-users.js'
import {
  benchServiceEnv,
  cpuSeconds,
  installCleanup,
  makeTempRoot,
  startServer,
  stopServer,
} from './procs.js'
import { makeToken } from './token.js'

const ROOT = resolve(fileURLToPath(import.meta.url), '..', '..', '..')
const USERS = Number(process.env['PROFILE_USERS'] ?? '20000')
const SETTLE_MS = Number(process.env['PROFILE_SETTLE_MS'] ?? '3000')
const OUT = process.env['PROFILE_OUT']
const DIST = resolve(process.env['PROFILE_DIST'] ?? join(ROOT, 'dist'))
const SECRET = randomBytes(24).toString('hex')
const AUTH = `Bearer ${makeToken(SECRET)}`

installCleanup()

/** The id of the last event in the log (the newest segment's last line). */
async function lastEventId(dir: string): Promise<string> {
  const segments = (await readdir(join(dir, 'events'))).filter((name) => name.endsWith('.ndjson'))
  const newest = segments.sort().at(-1)
  if (newest === undefined) throw new Error('no event log')
  const lines = (await readFile(join(dir, 'events', newest), 'utf8')).trimEnd().split('\n')
  return /^\{"id":"([0-9a-f]{16})"/.exec(lines.at(-1) ?? '')?.[1] ?? ''
}

/** Milliseconds from now until checkpoint.json covers the whole log (every file durable). */
async function checkpointed(dir: string, timeoutMs: number): Promise<number> {
  const started = performance.now()
  const last = await lastEventId(dir)
  while (performance.now() - started < timeoutMs) {
    const text = await readFile(join(dir, 'checkpoint.json'), 'utf8').catch(() => '')
    const through = /"through":"([0-9a-f]{16})"/.exec(text)?.[1] ?? ''
    if (through >= last) return performance.now() - started
    await new Promise((done) => setTimeout(done, 20))
  }
  return Number.NaN
}
const nowUs = (): number => Number(process.hrtime.bigint() / 1000n)
const shortFile = (url: string): string => {
  if (url === '') return ''
  const file = url.startsWith('file://') ? fileURLToPath(url) : url
  return file.startsWith(ROOT) ? relative(ROOT, file) : file
}

const temp = makeTempRoot()
const dataDir = join(temp, 'data')
const profDir = join(temp, 'prof')
const server = await startServer({
  name: 'service',
  command: process.execPath,
  args: ['--cpu-prof', '--cpu-prof-dir', profDir, join(DIST, 'bin.js')],
  cwd: ROOT,
  env: benchServiceEnv(SECRET, dataDir),
  readyz: true,
  timeoutMs: 120_000,
})
const cpu0 = cpuSeconds(server.pid)
const from = nowUs()
const imported = await importUsers(server.url, AUTH, USERS)
const mid = nowUs()
const cpu1 = cpuSeconds(server.pid)
const durableMs = await checkpointed(dataDir, 60_000)
const settled = nowUs()
await new Promise((done) => setTimeout(done, Math.max(0, SETTLE_MS - (settled - mid) / 1000)))
const to = nowUs()
const cpu2 = cpuSeconds(server.pid)
await stopServer(server)

const file = (await readdir(profDir)).find((name) => name.endsWith('.cpuprofile'))
if (file === undefined) throw new Error(`no .cpuprofile in ${profDir}`)
const profile = JSON.parse(await readFile(join(profDir, file), 'utf8')) as CpuProfile
const byId = new Map(profile.nodes.map((node) => [node.id, node]))
const key = (frame: CallFrame): string =>
  `${frame.functionName || '(anonymous)'} ${shortFile(frame.url)}${frame.url === '' ? '' : `:${frame.lineNumber + 1}`}`

/** Self time by function and by file over samples in [start, end) of the monotonic clock. */
function window(start: number, end: number) {
  const byFunction = new Map<string, number>()
  const byFile = new Map<string, number>()
  let total = 0
  let at = profile.startTime
  for (let i = 0; i < profile.samples.length; i += 1) {
    at += profile.timeDeltas[i] ?? 0
    const spent = profile.timeDeltas[i + 1] ?? 0
    const frame = byId.get(profile.samples[i] ?? -1)?.callFrame
    if (frame === undefined || at < start || at >= end) continue
    total += spent
    byFunction.set(key(frame), (byFunction.get(key(frame)) ?? 0) + spent)
    const where = frame.url === '' ? frame.functionName : shortFile(frame.url)
    byFile.set(where, (byFile.get(where) ?? 0) + spent)
  }
  return { byFunction, byFile, total }
}

const perUser = (us: number): string => (us / USERS).toFixed(2).padStart(7)
const top = (map: Map<string, number>, total: number, n: number): string[] =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(
      ([name, us]) => `${perUser(us)} µs  ${((100 * us) / total).toFixed(1).padStart(5)}%  ${name}`,
    )

const during = window(from, mid)
const after = window(mid, to)
const created = imported.statuses.get(201) ?? 0
process.stdout.write(
  [
    `POST /users:import, ${USERS} users: ${created} created in ${(imported.ms / 1000).toFixed(2)} s, ${(created / (imported.ms / 1000)).toFixed(0)} users/s`,
    `every file durable (checkpoint.json past the last event) ${durableMs.toFixed(0)} ms after the last result: ${(created / ((imported.ms + durableMs) / 1000)).toFixed(0)} users/s counting that`,
    `process CPU (user + system, every thread): ${perUser((cpu1 - cpu0) * 1e6)} µs/user during the import, ${perUser((cpu2 - cpu1) * 1e6)} µs/user in the ${((to - mid) / 1000).toFixed(0)} ms after it`,
    `main thread during the import: ${perUser(during.total - (during.byFunction.get('(idle) ') ?? 0))} µs/user not idle of ${perUser(during.total)}`,
    '',
    'during the import, self time by file (µs per user):',
    ...top(during.byFile, during.total, 20),
    '',
    'during the import, self time by function:',
    ...top(during.byFunction, during.total, 40),
    '',
    `after the import (${((to - mid) / 1000).toFixed(0)} ms: the checkpoint), self time by function:`,
    ...top(after.byFunction, after.total, 15),
    '',
  ].join('\n'),
)
if (OUT !== undefined) await copyFile(join(profDir, file), OUT)
