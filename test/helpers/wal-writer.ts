/**
 * A child process for the write-ahead-log recovery tests:
 * `node --import tsx wal-writer.ts DATA_DIR SEED LIMIT [CREATES]` opens a FileStore there (its
 * checkpoint interval from CHECKPOINT_MS), prints `ready`, then creates, updates and deletes users
 * with 8 concurrent writers, printing every change once the store has acknowledged it:
 * `<id> <version>` for a create or an update, `<id> <version> deleted` for a deletion (the version
 * its event carries). After LIMIT acknowledged changes (0: never) the writers stop, it prints
 * `done` and idles with the store open, so that a kill then leaves an exact, known state. CREATES
 * is the share of changes that create a user (default 0.3); about one in ten deletes one.
 */

import { FileStore } from '../../src/store/file/file-store.js'
import { createRandom } from './seeded-random.js'
import { allUserIds, changeUser, makeUser } from './store-users.js'

const WRITERS = 8

const [dataDir, seedArg = '1', limitArg = '0', createsArg = '0.3'] = process.argv.slice(2)
if (dataDir === undefined) throw new Error('usage: wal-writer.ts DATA_DIR SEED LIMIT [CREATES]')
const random = createRandom(Number(seedArg))
const limit = Number(limitArg)
const creates = Number(createsArg)
const checkpointMs = Number(process.env['CHECKPOINT_MS'] ?? '1000')

const store = new FileStore({ dataDir, checkpointMs })
await store.open()
/** Users that no writer is deleting; a deletion takes its user out first, so nobody updates it after. */
const live = await allUserIds(store)
// stdout is a pipe: on Linux its writes are synchronous, so a printed line is one the store acknowledged.
process.stdout.write('ready\n')

let started = 0
const filler = (): string => 'x'.repeat(Math.floor(random() * 300))

async function changeOne(): Promise<string> {
  const pick = Math.floor(random() * live.length)
  const id = live[pick]
  const roll = random()
  if (id === undefined || live.length < 20 || roll < creates) {
    const record = await store.create(makeUser({ metadata: { pad: filler() } }))
    live.push(record.user.id)
    return `${record.user.id} 1`
  }
  if (roll > 0.9) {
    live.splice(pick, 1)
    let version = 0
    await store.delete(id, (current) => {
      version = current.user.version + 1
    })
    return `${id} ${version} deleted`
  }
  const record = await store.update(id, (current) =>
    changeUser(current.user, {
      metadata: { n: String(current.user.version), pad: filler() },
    }),
  )
  return `${id} ${record.user.version}`
}

async function runWriter(): Promise<void> {
  while (limit === 0 || started < limit) {
    started += 1
    process.stdout.write(`${await changeOne()}\n`)
  }
}

await Promise.all(Array.from({ length: WRITERS }, runWriter))
process.stdout.write('done\n')
// Idles with the store open until killed: nothing more is written.
setInterval(() => undefined, 60_000)
