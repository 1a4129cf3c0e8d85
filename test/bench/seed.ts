// Writes a service data directory directly on disk (seeding through HTTP is too slow):
// DATA_DIR/users/<id>.json, one file per user, mode 0600, in a directory of mode 0700.
import { randomBytes } from 'node:crypto'
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setImmediate as turn } from 'node:timers/promises'

export interface SeededUser {
  id: string
  email: string
  name: string
}

const hex = (bytes: Buffer): string => bytes.toString('hex')

/** A UUIDv7 for the given unix time in ms: 48-bit timestamp, version 7, variant 10xx. */
export const uuidv7 = (ms: number): string => {
  const ts = ms.toString(16).padStart(12, '0')
  const rnd = randomBytes(11)
  const randA = hex(rnd.subarray(0, 2)).slice(1)
  const variant = (8 | ((rnd[2] ?? 0) & 3)).toString(16)
  const randB = hex(rnd.subarray(3, 11)).slice(0, 15)
  return `${ts.slice(0, 8)}-${ts.slice(8, 12)}-7${randA}-${variant}${randB.slice(0, 3)}-${randB.slice(3, 15)}`
}

/** Files written between two turns of the event loop, so that the bench's pipes keep draining. */
const CHUNK = 2000

/**
 * Seeds `count` users into `dataDir`. Every user gets its own millisecond, so ids
 * are strictly increasing in creation order and createdAt matches the id's timestamp.
 * Synchronous writes: about twice as fast as fs/promises for small files (no thread pool hops).
 */
export const seedDataDir = async (dataDir: string, count: number): Promise<SeededUser[]> => {
  const usersDir = join(dataDir, 'users')
  mkdirSync(usersDir, { recursive: true, mode: 0o700 })
  chmodSync(dataDir, 0o700)
  chmodSync(usersDir, 0o700)
  const start = Date.now() - count - 60_000
  const users: SeededUser[] = []
  for (let i = 0; i < count; i++) {
    const n = i + 1
    const user = {
      id: uuidv7(start + i),
      email: `user${n}@bench.example.com`,
      name: `Bench User ${n}`,
    }
    users.push(user)
    const at = new Date(start + i).toISOString()
    const json = JSON.stringify({
      id: user.id,
      email: user.email,
      name: user.name,
      status: 'active',
      metadata: {},
      createdAt: at,
      updatedAt: at,
      version: 1,
    })
    writeFileSync(join(usersDir, `${user.id}.json`), json, { mode: 0o600, flag: 'wx' })
    if (n % CHUNK === 0) await turn()
  }
  return users
}
