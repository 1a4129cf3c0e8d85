import { execFile } from 'node:child_process'
import { chmod, mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { TestContext } from 'node:test'
import { promisify } from 'node:util'

import { sql } from './postgres.js'

const run = promisify(execFile)

/** A second throwaway PostgreSQL cluster, started as scripts/with-postgres.sh starts its own. */
export interface Cluster {
  /** The directory of the server's programs (pg_dump, pg_restore…). */
  readonly bin: string
  /** Makes an empty database and gives its URL. */
  createDatabase(name: string): Promise<string>
}

/** The directory of pg_ctl: scripts/with-postgres.sh puts the server's own first on the PATH. */
async function serverBin(): Promise<string> {
  const { stdout } = await run('sh', ['-c', 'command -v pg_ctl'])
  return path.dirname(stdout.trim())
}

function sparePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => {
        resolve(typeof address === 'object' && address !== null ? address.port : 0)
      })
    })
  })
}

/**
 * initdb in a temporary directory (as the `postgres` user when run as root, since initdb refuses
 * root), started on a spare port with fsync off; stopped and removed when the test ends.
 */
export async function startCluster(t: TestContext): Promise<Cluster> {
  const bin = await serverBin()
  const root = await mkdtemp(path.join(tmpdir(), 'pg-cluster-'))
  await chmod(root, 0o755)
  const asOwner = process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--'] : []
  if (asOwner.length > 0) await run('chown', ['postgres', root])
  const data = path.join(root, 'data')
  const owned = (program: string, args: string[]) => {
    const [command = program, ...rest] = [...asOwner, path.join(bin, program), ...args]
    return run(command, rest)
  }
  t.after(async () => {
    await owned('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined)
    await rm(root, { recursive: true, force: true })
  })
  await owned('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C'])
  const port = await sparePort()
  await owned('pg_ctl', [
    '-D',
    data,
    '-l',
    path.join(root, 'server.log'),
    '-w',
    '-t',
    '30',
    '-o',
    `-p ${port} -h 127.0.0.1 -k ${root} -c fsync=off -c synchronous_commit=off -c full_page_writes=off`,
    'start',
  ])
  const base = `postgres://postgres@127.0.0.1:${port}`
  return {
    bin,
    async createDatabase(name) {
      await sql(`CREATE DATABASE ${name}`, [], `${base}/postgres`)
      return `${base}/${name}`
    },
  }
}
