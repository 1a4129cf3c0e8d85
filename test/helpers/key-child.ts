/**
 * A child process for the file store's key tests: `node --import tsx key-child.ts MODE DATA_DIR
 * [COUNT] [PREFIX]` opens a FileStore there (CHECKPOINT_MS from the environment) and prints `ready`.
 *
 * - `write`: creates users with 8 writers, each with its own `Idempotency-Key` (`PREFIX-<n>`, subject
 *   `writer`), printing `<key> <user id>` once the store has acknowledged it; after COUNT of them
 *   (0: never stops) prints `done` and idles with the store open until killed.
 * - `alone`: creates the shim's marker file (SHIM_FAIL_MARKER), keeps the key `alone-1` alone, and
 *   prints what that did as one JSON line (`{"kept":true}` or the error's name, code, outcome and
 *   the store's health), then whether the key is found, and exits without closing the store.
 * - `pinned`: creates the shim's open marker (SHIM_FAIL_OPEN_MARKER), so that no key's journal
 *   can be written, makes one keyed create (key `pinned-1`), prints `created <id>` and
 *   `found <true|false>`, waits for three checkpoints, prints `done` and idles until killed.
 * - `blank`: on a clock of its own, makes one keyed create whose key (`blank-1`) expires in 2 s,
 *   creates the shim's marker (SHIM_FAIL_MARKER: syncs under SHIM_FAIL_UNDER, the log's
 *   segments, fail), moves the clock past the key's journal and prints `journals <n> <health>`
 *   (the files in keys/, the store's health) once a few sweeps ran, removes the marker and prints
 *   it again after a few more, then `done`, and idles until killed.
 * - `first-find`: looks for the key `lasting` of `find-subject` at once, while the sweep at open
 *   blanks the copies of a passed journal's keys, and prints `found <true|false> journals <n>`
 *   (the files in keys/ when it was found), then `swept` once only one journal is left.
 * - `memory`: keeps COUNT distinct keys with updates of 100 users (16 at once), printing
 *   `rss <MB>` after a fifth of them and again after all, then `done`, and idles until killed.
 */
import { readdirSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import { ServiceError } from '../../src/domain/errors.js'
import { FileStore } from '../../src/store/file/file-store.js'
import { readRssMb } from './proc-stats.js'
import { aloneKey, keyToKeep } from './store-keys-suite.js'
import { changeUser, makeUser } from './store-users.js'

const [mode, dataDir, countArg = '0', prefix = 'key'] = process.argv.slice(2)
if (mode === undefined || dataDir === undefined)
  throw new Error(
    'usage: key-child.ts write|alone|pinned|blank|first-find|memory DATA_DIR [COUNT] [PREFIX]',
  )
const count = Number(countArg)
const checkpointMs = Number(process.env['CHECKPOINT_MS'] ?? '1000')

// `blank` and `first-find` run on a clock of their own (KEY_CHILD_NOW, else now), swept every
// 50 ms; the others on the real one.
let clock = Number(process.env['KEY_CHILD_NOW'] ?? String(Date.now()))
const ownClock = mode === 'blank' || mode === 'first-find'
const store = new FileStore({
  dataDir,
  checkpointMs,
  ...(ownClock ? { now: () => clock, keySweepMs: 50 } : {}),
})
await store.open()
// stdout is a pipe: on Linux its writes are synchronous, so a printed line is one the store acknowledged.
process.stdout.write('ready\n')

const idle = (): void => {
  process.stdout.write('done\n')
  setInterval(() => undefined, 60_000)
}

if (mode === 'write') {
  let started = 0
  const writer = async (): Promise<void> => {
    while (count === 0 || started < count) {
      const key = `${prefix}-${started}`
      started += 1
      const idempotency = keyToKeep('writer', key, { expiresAt: Date.now() + 3_600_000 })
      const record = await store.create(makeUser(), undefined, { actor: 'writer', idempotency })
      process.stdout.write(`${key} ${record.user.id}\n`)
    }
  }
  await Promise.all(Array.from({ length: 8 }, writer))
  idle()
} else if (mode === 'alone') {
  const marker = process.env['SHIM_FAIL_MARKER']
  if (marker === undefined) throw new Error('alone: no SHIM_FAIL_MARKER')
  writeFileSync(marker, '')
  let outcome: Record<string, unknown>
  try {
    await store.keys.keepAlone(aloneKey('alone-subject', 'alone-1'))
    outcome = { kept: true }
  } catch (error) {
    outcome =
      error instanceof ServiceError
        ? { name: error.name, code: error.code, outcome: error.outcome ?? null }
        : { name: String(error) }
  }
  process.stdout.write(`${JSON.stringify({ ...outcome, health: store.health().state })}\n`)
  const found = await store.keys.find('alone-subject', 'alone-1')
  process.stdout.write(`found ${found !== undefined}\n`)
  process.exit(0)
} else if (mode === 'pinned') {
  const marker = process.env['SHIM_FAIL_OPEN_MARKER']
  if (marker === undefined) throw new Error('pinned: no SHIM_FAIL_OPEN_MARKER')
  writeFileSync(marker, '')
  const idempotency = keyToKeep('pinned-subject', 'pinned-1')
  const record = await store.create(makeUser(), undefined, { idempotency })
  process.stdout.write(`created ${record.user.id}\n`)
  const found = await store.keys.find('pinned-subject', 'pinned-1')
  process.stdout.write(`found ${found !== undefined}\n`)
  await new Promise((resolve) => setTimeout(resolve, 3 * checkpointMs))
  idle()
} else if (mode === 'blank') {
  const marker = process.env['SHIM_FAIL_MARKER']
  if (marker === undefined) throw new Error('blank: no SHIM_FAIL_MARKER')
  const idempotency = keyToKeep('blank-subject', 'blank-1', { expiresAt: clock + 2_000 })
  await store.create(makeUser(), undefined, { idempotency })
  const count = (): number => readdirSync(path.join(dataDir, 'keys')).length
  const journals = (): string => `journals ${count()} ${store.health().state}\n`
  // Its journal line is appended after the answer.
  while (count() !== 1) await new Promise((resolve) => setTimeout(resolve, 10))
  writeFileSync(marker, '')
  clock += 90_000
  // The sweep's blanking may wait behind a checkpoint's fsyncs: up to 10 s for its failure.
  const deadline = Date.now() + 10_000
  while (store.health().state !== 'read_only' && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 20))
  process.stdout.write(journals())
  rmSync(marker)
  await new Promise((resolve) => setTimeout(resolve, 500))
  process.stdout.write(journals())
  idle()
} else if (mode === 'first-find') {
  const keysDir = path.join(dataDir, 'keys')
  const found = await store.keys.find('find-subject', 'lasting')
  process.stdout.write(`found ${found !== undefined} journals ${readdirSync(keysDir).length}\n`)
  while (readdirSync(keysDir).length > 1) await new Promise((resolve) => setTimeout(resolve, 10))
  process.stdout.write('swept\n')
  idle()
} else if (mode === 'memory') {
  const ids: string[] = []
  for (let i = 0; i < 100; i += 1) ids.push((await store.create(makeUser())).user.id)
  let next = 0
  const keep = async (until: number): Promise<void> => {
    const worker = async (): Promise<void> => {
      while (next < until) {
        const n = next
        next += 1
        const id = ids[n % ids.length] ?? ''
        const idempotency = keyToKeep('memory', `memory-key-${n}`)
        await store.update(
          id,
          (current) => changeUser(current.user, { metadata: { n: String(n) } }),
          { idempotency },
        )
      }
    }
    await Promise.all(Array.from({ length: 16 }, worker))
  }
  await keep(count / 5)
  process.stdout.write(`rss ${readRssMb(process.pid).toFixed(1)}\n`)
  await keep(count)
  process.stdout.write(`rss ${readRssMb(process.pid).toFixed(1)}\n`)
  idle()
} else {
  throw new Error(`unknown mode ${mode}`)
}
