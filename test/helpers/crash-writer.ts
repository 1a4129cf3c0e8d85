/**
 * A child process for the crash test: `node --import tsx crash-writer.ts DATA_DIR [SEED]` opens a
 * FileStore there, prints `ready`, then creates and updates users as fast as it can until killed,
 * printing `<id> <version>` for every write once the store has acknowledged it. The choice of
 * create or update, the user updated and the padding come from SEED, so a round can be replayed.
 */

import type { UserRecord } from '../../src/domain/user.js'
import { FileStore } from '../../src/store/file/file-store.js'
import { createRandom } from './seeded-random.js'
import { allUserIds, changeUser, makeUser } from './store-users.js'

const WRITERS = 8

const dataDir = process.argv[2]
if (dataDir === undefined) throw new Error('usage: crash-writer.ts DATA_DIR [SEED]')
const random = createRandom(Number(process.argv[3] ?? '1'))

const store = new FileStore({ dataDir })
await store.open()
const ids = await allUserIds(store)
// stdout is a pipe: on Linux its writes are synchronous, so a printed line is one the store acknowledged.
process.stdout.write('ready\n')

/** A name of varying length, so that a torn file would be easy to tell from a whole one. */
const filler = (): string => 'x'.repeat(Math.floor(random() * 400))

async function writeOne(): Promise<UserRecord> {
  const id = ids[Math.floor(random() * ids.length)]
  if (id === undefined || ids.length < 40 || random() < 0.3) {
    const record = await store.create(makeUser({ metadata: { pad: filler() } }))
    ids.push(record.user.id)
    return record
  }
  return store.update(id, (current) =>
    changeUser(current.user, {
      metadata: { ...current.user.metadata, n: String(current.user.version), pad: filler() },
    }),
  )
}

async function runWriter(): Promise<void> {
  for (;;) {
    const record = await writeOne()
    process.stdout.write(`${record.user.id} ${record.user.version}\n`)
  }
}

await Promise.all(Array.from({ length: WRITERS }, runWriter))
