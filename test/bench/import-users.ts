// POST /users:import as the bench drives it (run.ts's import row and bulk.ts), and its reference:
// the same number of files each written the raw durable way (temp file, fsync, rename, fsync of
// the directory), 64 at a time.
import { randomBytes, randomUUID } from 'node:crypto'
import { open, rename } from 'node:fs/promises'
import { request } from 'node:http'
import { join } from 'node:path'

/** Streams `count` new-user lines into POST /users:import; resolves with the statuses seen. */
export function importUsers(
  url: string,
  auth: string,
  count: number,
): Promise<{ ms: number; statuses: Map<number, number> }> {
  return new Promise((resolvePromise, reject) => {
    const started = performance.now()
    const statuses = new Map<number, number>()
    const req = request(
      `${url}/users:import`,
      {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/x-ndjson' },
      },
      (res) => {
        let rest = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          const lines = (rest + chunk).split('\n')
          rest = lines.pop() ?? ''
          for (const line of lines) {
            const status = (JSON.parse(line) as { status: number }).status
            statuses.set(status, (statuses.get(status) ?? 0) + 1)
          }
        })
        res.on('end', () => resolvePromise({ ms: performance.now() - started, statuses }))
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    const tag = randomBytes(4).toString('hex')
    let sent = 0
    const write = (): void => {
      while (sent < count) {
        let chunk = ''
        for (const end = Math.min(count, sent + 500); sent < end; sent += 1) {
          chunk += `${JSON.stringify({ email: `user${sent}.${tag}@bulk.example.com`, name: `Bulk User ${sent}`, metadata: { n: String(sent) } })}\n`
        }
        if (!req.write(chunk)) {
          req.once('drain', write)
          return
        }
      }
      req.end()
    }
    write()
  })
}

const BODY = JSON.stringify({
  id: '0'.repeat(36),
  email: 'someone@bulk.example.com',
  name: 'Bulk User 1',
  status: 'pending',
  metadata: { n: '1' },
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  version: 1,
})

/** One raw durable write: temp file, write, fsync, close, rename, fsync of the directory. */
async function durableWrite(dir: string): Promise<void> {
  const temp = join(dir, `.${randomUUID()}.tmp`)
  const file = await open(temp, 'wx', 0o600)
  try {
    await file.writeFile(BODY)
    await file.sync()
  } finally {
    await file.close()
  }
  await rename(temp, join(dir, `${randomUUID()}.json`))
  const directory = await open(dir, 'r')
  try {
    await directory.sync()
  } finally {
    await directory.close()
  }
}

/** Writes `count` files into `dir` the raw durable way, `concurrency` at a time; files per second. */
export async function rawDurableWrites(
  dir: string,
  count: number,
  concurrency = 64,
): Promise<number> {
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next += 1
        await durableWrite(dir)
      }
    }),
  )
  return count / ((performance.now() - started) / 1000)
}
