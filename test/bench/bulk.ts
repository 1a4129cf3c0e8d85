// Bulk import and export (§12), not a unit test: `node --import tsx test/bench/bulk.ts` (after
// `npm run build`; `npm run bench` runs it after the request cases). BULK_USERS users (default
// 100,000) are imported as new users through POST /users:import into a service on the file store,
// then exported through GET /users:export; the same on PostgreSQL when DATABASE_URL is set.
// Beside them, in the same run, what the data directory's disk itself does: the same number of
// files written the way the store writes one (temp file, fsync, rename, shared directory fsync,
// 64 at a time), and bare file creation without any fsync. Targets: import ≥ 10,000 users/s on
// the file store and ≥ 5,000 on PostgreSQL, export ≥ 50,000 users/s with RSS growing < 20 MB.
import { randomBytes } from 'node:crypto'
import { mkdir, open, rename, rm } from 'node:fs/promises'
import { request } from 'node:http'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { DurableDirectory } from '../../src/store/file/atomic-write.js'
import { importUsers } from './import-users.js'
import { createDatabase, POSTGRES_URL } from './postgres-cases.js'
import {
  installCleanup,
  makeTempRoot,
  rssMb,
  SERVICE_BENCH_ENV,
  type Server,
  startServer,
  stopServer,
} from './procs.js'
import { makeToken } from './token.js'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
const MAIN = join(ROOT, 'dist', 'bin.js')
const USERS = Number(process.env['BULK_USERS'] ?? '100000')
const CONCURRENCY = 64
const SECRET = randomBytes(24).toString('hex')
const AUTH = `Bearer ${makeToken(SECRET)}`

const log = (line: string): void => {
  process.stdout.write(`${line}\n`)
}
const rate = (count: number, ms: number): number => Math.round(count / (ms / 1000))

installCleanup()
const tempRoot = makeTempRoot()
let dirs = 0
const newDir = async (prefix: string): Promise<string> => {
  dirs += 1
  const dir = join(tempRoot, `${prefix}-${dirs}`)
  await mkdir(dir, { recursive: true })
  return dir
}

/**
 * Writes `count` files into a fresh directory, 64 at a time: `durable` through the store's own
 * DurableDirectory (temp file, fsync, rename, group-committed directory fsync), else created and
 * renamed with no fsync at all.
 */
async function diskRate(count: number, durable: boolean): Promise<number> {
  const dir = await newDir(durable ? 'disk-durable' : 'disk-bare')
  const directory = await DurableDirectory.open(dir)
  const body = JSON.stringify({
    id: '0'.repeat(36),
    email: 'someone@example.com',
    name: 'Someone',
    status: 'pending',
    metadata: {},
  })
  const bare = async (i: number): Promise<void> => {
    const temp = join(dir, `.${i}.tmp`)
    const file = await open(temp, 'wx', 0o600)
    await file.writeFile(body)
    await file.close()
    await rename(temp, join(dir, `${i}.json`))
  }
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        const i = next++
        await (durable ? directory.writeFile(`${i}.json`, body) : bare(i))
      }
    }),
  )
  const ms = performance.now() - started
  await directory.close()
  await rm(dir, { recursive: true, force: true })
  return rate(count, ms)
}

async function startService(env: NodeJS.ProcessEnv): Promise<Server> {
  return startServer({
    name: 'service',
    command: process.execPath,
    args: [MAIN],
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      JWT_SECRET: SECRET,
      WORKERS: undefined,
      ...SERVICE_BENCH_ENV,
      ...env,
    },
    readyz: true,
    timeoutMs: 120_000,
  })
}

/** Reads GET /users:export to its end, sampling the service's RSS; resolves with lines and the RSS growth. */
function exportUsers(
  url: string,
  pid: number,
): Promise<{ ms: number; lines: number; rssGrowthMb: number }> {
  return new Promise((resolvePromise, reject) => {
    const before = rssMb(pid)
    let peak = before
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssMb(pid))
    }, 20)
    const started = performance.now()
    const req = request(`${url}/users:export`, { headers: { authorization: AUTH } }, (res) => {
      let lines = 0
      res.on('data', (chunk: Buffer) => {
        for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines += 1
      })
      res.on('end', () => {
        clearInterval(sampler)
        peak = Math.max(peak, rssMb(pid))
        resolvePromise({ ms: performance.now() - started, lines, rssGrowthMb: peak - before })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

interface Row {
  readonly label: string
  readonly value: string
  readonly target: string
  readonly pass: boolean | null
}
const rows: Row[] = []

async function bulkCase(
  store: string,
  env: NodeJS.ProcessEnv,
  importTarget: number,
  close: () => Promise<void>,
): Promise<void> {
  log(`\n== ${store}: import and export of ${USERS} users`)
  const service = await startService(env)
  try {
    const imported = await importUsers(service.url, AUTH, USERS)
    const created = imported.statuses.get(201) ?? 0
    const importRate = rate(created, imported.ms)
    log(
      `  import: ${created} created in ${(imported.ms / 1000).toFixed(1)} s, ${importRate} users/s; statuses ${JSON.stringify([...imported.statuses])}`,
    )
    rows.push({
      label: `import, ${store}`,
      value: `${importRate} users/s`,
      target: `>= ${importTarget}`,
      pass: created === USERS && importRate >= importTarget,
    })
    const exported = await exportUsers(service.url, service.pid)
    const exportRate = rate(exported.lines, exported.ms)
    log(
      `  export: ${exported.lines} lines in ${(exported.ms / 1000).toFixed(2)} s, ${exportRate} users/s, RSS +${exported.rssGrowthMb.toFixed(1)} MB`,
    )
    rows.push({
      label: `export, ${store}`,
      value: `${exportRate} users/s`,
      target: '>= 50000',
      pass: exported.lines === USERS && exportRate >= 50_000,
    })
    rows.push({
      label: `export RSS growth, ${store}`,
      value: `${exported.rssGrowthMb.toFixed(1)} MB`,
      target: '< 20 MB',
      pass: exported.rssGrowthMb < 20,
    })
  } catch (error) {
    log(`  failed: ${String(error)}\n  the service's last words:\n${service.stderrTail()}`)
    rows.push({ label: `bulk, ${store}`, value: 'error', target: '', pass: false })
  } finally {
    await stopServer(service)
    await close()
  }
}

log(`bulk benchmark: ${USERS} users, Node ${process.version}, temp root ${tempRoot}`)
log('\n== the disk alone (same file system as the data directories)')
const durable = await diskRate(USERS, true)
log(
  `  files written as the store writes one (temp, fsync, rename, shared directory fsync): ${durable}/s`,
)
const bare = await diskRate(USERS, false)
log(`  files created and renamed, no fsync at all: ${bare}/s`)
rows.push({
  label: 'disk: durable file writes',
  value: `${durable}/s`,
  target: 'reference',
  pass: null,
})
rows.push({
  label: 'disk: bare file creation',
  value: `${bare}/s`,
  target: 'reference',
  pass: null,
})

const fileDir = await newDir('data')
await bulkCase('file store', { DATA_DIR: fileDir, DATABASE_URL: undefined }, 10_000, () =>
  rm(fileDir, { recursive: true, force: true }),
)
if (POSTGRES_URL === undefined) {
  log('\n== PostgreSQL skipped: DATABASE_URL is not set (scripts/with-postgres.sh npm run bench)')
} else {
  const db = await createDatabase()
  await bulkCase(
    'PostgreSQL',
    { DATA_DIR: await newDir('pg-data'), DATABASE_URL: db.url },
    5_000,
    db.drop,
  )
}

log('\n== summary')
for (const row of rows) {
  const verdict = row.pass === null ? '' : row.pass ? 'PASS' : 'FAIL'
  log(`  ${row.label.padEnd(34)} ${row.value.padStart(16)}  ${row.target.padEnd(10)} ${verdict}`)
}
