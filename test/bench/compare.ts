// Two builds of the service, interleaved, on the bench's hottest path: `node --import tsx
// test/bench/compare.ts <dist A> <dist B>` (each a directory holding bin.js, e.g. a copy of
// dist/ made before a change). Not a unit test. GET /users/{id} over 10,000 users with a token,
// LOG_LEVEL=info and metrics on, wrk -t1 -c16, COMPARE_ROUNDS rounds (default 6) of
// COMPARE_DURATION_S seconds (default 3) per server, the order rotating every round, with the
// auth reference (reference-server.ts) in the rotation. Prints every run's rps and CPU per
// request, the medians, B over A, and the spread of A's runs (the noise).
import { randomBytes } from 'node:crypto'
import { cpSync } from 'node:fs'
import { join, resolve } from 'node:path'

import { compiledReference } from './compile.js'
import { getById } from './lua-scripts.js'
import {
  benchServiceEnv,
  installCleanup,
  makeTempRoot,
  type Server,
  startServer,
  stopServer,
  treeCpuSeconds,
} from './procs.js'
import { median } from './results-types.js'
import { seedDataDir } from './seed.js'
import { makeToken } from './token.js'
import { ensureWrk, runWrk } from './wrk.js'

const [distA, distB] = process.argv.slice(2)
if (distA === undefined || distB === undefined) {
  process.stderr.write('usage: compare.ts <dist A> <dist B>\n')
  process.exit(2)
}
const ROUNDS = Number(process.env['COMPARE_ROUNDS'] ?? '6')
const DURATION_S = Number(process.env['COMPARE_DURATION_S'] ?? '3')
const USERS = 10_000
const SECRET = randomBytes(24).toString('hex')
const AUTH = `Bearer ${makeToken(SECRET)}`

ensureWrk()
installCleanup()
const temp = makeTempRoot()

const service = async (dist: string, name: string): Promise<Server> => {
  const dataDir = join(temp, name)
  // Creates the directory with the modes the service wants; the users are there already.
  await seedDataDir(dataDir, 0)
  return startServer({
    name,
    command: process.execPath,
    args: [join(resolve(dist), 'bin.js')],
    env: benchServiceEnv(SECRET, dataDir),
    readyz: true,
    timeoutMs: 120_000,
  })
}

// One set of users for all three: A's directory is seeded, B gets a copy of its files, and the
// auth reference reads A's.
const seeded = await seedDataDir(join(temp, 'A'), USERS)
cpSync(join(temp, 'A', 'users'), join(temp, 'B', 'users'), { recursive: true })
const servers = {
  A: await service(distA, 'A'),
  B: await service(distB, 'B'),
  ref: await startServer({
    name: 'auth reference',
    command: process.execPath,
    args: [compiledReference('reference-server'), 'auth', join(temp, 'A')],
    env: { ...process.env, JWT_SECRET: SECRET },
    readyz: false,
  }),
}
const script = getById(
  AUTH,
  seeded.map((u) => u.id),
)
type Name = keyof typeof servers
const runs: Record<Name, { rps: number; cpuUs: number }[]> = { A: [], B: [], ref: [] }
const once = async (name: Name, durationS: number): Promise<{ rps: number; cpuUs: number }> => {
  const server = servers[name]
  const before = treeCpuSeconds(server.pid)
  const result = await runWrk({ url: server.url, script, tmpDir: temp, durationS, connections: 16 })
  const cpuUs = ((treeCpuSeconds(server.pid) - before) * 1e6) / result.requests
  if (result.errors > 0) throw new Error(`${name}: ${result.errors} failed requests`)
  return { rps: result.rps, cpuUs }
}
const names: Name[] = ['A', 'B', 'ref']
for (const name of names) await once(name, 1)
for (let round = 0; round < ROUNDS; round += 1) {
  const order = names.map((_, i) => names[(i + round) % names.length] ?? 'A')
  for (const name of order) {
    const run = await once(name, DURATION_S)
    runs[name].push(run)
    process.stderr.write(
      `round ${round + 1}/${ROUNDS} ${name.padEnd(3)} ${run.rps.toFixed(0)} rps, ${run.cpuUs.toFixed(2)} µs CPU/req\n`,
    )
  }
}
for (const server of Object.values(servers)) await stopServer(server)

const summary = (name: Name): { rps: number; cpuUs: number } => ({
  rps: median(runs[name].map((r) => r.rps)),
  cpuUs: median(runs[name].map((r) => r.cpuUs)),
})
const a = summary('A')
const b = summary('B')
const ref = summary('ref')
const spread = (values: number[]): string =>
  `${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)}`
process.stdout.write(
  [
    `A ${distA}: ${a.rps.toFixed(0)} rps, ${a.cpuUs.toFixed(2)} µs CPU/req (runs ${spread(runs.A.map((r) => r.cpuUs))} µs, ${spread(runs.A.map((r) => r.rps / 1000))}k rps)`,
    `B ${distB}: ${b.rps.toFixed(0)} rps, ${b.cpuUs.toFixed(2)} µs CPU/req (runs ${spread(runs.B.map((r) => r.cpuUs))} µs, ${spread(runs.B.map((r) => r.rps / 1000))}k rps)`,
    `auth reference: ${ref.rps.toFixed(0)} rps, ${ref.cpuUs.toFixed(2)} µs CPU/req`,
    `B / A: rps ${(b.rps / a.rps).toFixed(3)}, CPU per request ${(b.cpuUs / a.cpuUs).toFixed(3)}; vs the auth reference: A ${(a.rps / ref.rps).toFixed(2)}×, B ${(b.rps / ref.rps).toFixed(2)}×`,
    '',
  ].join('\n'),
)
