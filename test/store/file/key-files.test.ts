/**
 * The file store's kept Idempotency-Keys: in the log's append with their change (both or
 * neither), their lines in the journals of DATA_DIR/keys appended after and replayed from the
 * log, found after a restart or a SIGKILL, swept once expired. Real files, real child processes, real faults (the
 * syscall shim).
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { constants } from 'node:os'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { KeptKey } from '../../../src/domain/kept-key.js'
import { FileStore, type FileStoreOptions } from '../../../src/store/file/file-store.js'
import type { DurableWriteTiming } from '../../../src/store/write-timing.js'
import { bigMetadata } from '../../events/feed-fixtures.js'
import { type Child, exited, sleep, spawnService } from '../../helpers/child.js'
import { helperScript } from '../../helpers/child-scripts.js'
import { createMemoryLogger, makeTempDir } from '../../helpers/service.js'
import { aloneKey, keptOnce, keyToKeep } from '../../helpers/store-keys-suite.js'
import { changeUser, makeUser } from '../../helpers/store-users.js'
import { compileShim, shimEnv } from '../../helpers/syscall-shim.js'
import { type LoggedEvent, readCheckpointFile, readLog } from '../../helpers/wal-disk.js'
import { TORN_LINE_CUT as TORN } from '../../helpers/wal-recovery.js'

const CHILD = helperScript('key-child')
const NO_CHECKPOINT = 3_600_000
const shim = compileShim()

const dataDirOf = async (t: TestContext, prefix: string): Promise<string> =>
  path.join(await makeTempDir(t, prefix), 'data')

/** A key's SHA-256 (of subject, NUL, key), as its journal line and its earlier key file name it. */
const digestOf = (subject: string, key: string): string =>
  createHash('sha256').update(`${subject}\u0000${key}`).digest('hex')

const keyFiles = (dataDir: string): string[] => readdirSync(path.join(dataDir, 'keys')).sort()

/** The journal a key of this expiry goes to: DATA_DIR/keys/<start of its 30 s, UTC>.keys. */
function journalOf(dataDir: string, expiresAt: number): string {
  const start = new Date(Math.floor(expiresAt / 30_000) * 30_000).toISOString()
  return path.join(dataDir, 'keys', `${start.slice(0, 19).replace(/[-:]/g, '')}.keys`)
}

/** The key's lines in the journals of DATA_DIR/keys, their JSON (before a tab and the log's copy) parsed. */
function journalLines(dataDir: string, subject: string, key: string): unknown[] {
  const prefix = `${digestOf(subject, key)} `
  return keyFiles(dataDir)
    .filter((name) => name.endsWith('.keys'))
    .flatMap((name) => readFileSync(path.join(dataDir, 'keys', name), 'utf8').split('\n'))
    .filter((line) => line.startsWith(prefix))
    .map((line) => JSON.parse(line.slice(prefix.length).split('\t')[0] ?? '') as unknown)
}

/** The key lines of the log whose key was blanked: `{"key":null<spaces>,"for":"<id>"}`. */
const blankedLines = (dataDir: string): string[] =>
  logText(dataDir)
    .split('\n')
    .filter((line) => /^\{"key":null +,"for":"[0-9a-f]{16}"\}$/.test(line))

/** Every segment of DATA_DIR/events as one text. */
const logText = (dataDir: string): string =>
  readLog(dataDir)
    .segments.map((name) => readFileSync(path.join(dataDir, 'events', name), 'utf8'))
    .join('')

/** Opens a FileStore with a logger that keeps its lines; closed when the test ends (once). */
async function openStore(
  t: TestContext,
  dataDir: string,
  options: Partial<FileStoreOptions> = {},
): Promise<{ store: FileStore; logs: Record<string, unknown>[]; close(): Promise<void> }> {
  const logs: Record<string, unknown>[] = []
  const store = new FileStore({ dataDir, logger: createMemoryLogger(logs), ...options })
  await store.open()
  let closed = false
  const close = async (): Promise<void> => {
    if (closed) return
    closed = true
    await store.close()
  }
  t.after(close)
  return { store, logs, close }
}

/** Every event of the feed as `<type> <user id>`. */
async function feed(store: FileStore): Promise<string[]> {
  const page = await store.events.read({ limit: 1000 })
  return page.items.map((event) => `${event.type} ${event.userId}`)
}

/** The id after `id`, as the log writes ids. */
const nextId = (id: string): string => (BigInt(`0x${id}`) + 1n).toString(16).padStart(16, '0')

/** A key's line as the store writes it into the log, just before its event's line. */
const keyLineFor = (kept: KeptKey, eventId: string): string =>
  `${JSON.stringify({ key: kept, for: eventId })}\n`

/** A create event's line for a new user, copied from a logged one, with the next id. */
function createdLine(dataDir: string, name: string): { line: string; id: string; userId: string } {
  const log = readLog(dataDir)
  const created = log.events.find((event) => event.type === 'user.created')
  assert.ok(created !== undefined, 'no create in the log')
  const user = makeUser({ name })
  const id = nextId(log.highest)
  const line = JSON.stringify({
    ...(JSON.parse(created.line) as LoggedEvent),
    id,
    userId: user.id,
    user,
  })
  return { line, id, userId: user.id }
}

const lastSegment = (dataDir: string): string =>
  path.join(dataDir, 'events', readLog(dataDir).segments.at(-1) ?? '')

/** Runs key-child.ts; killed when the test ends. */
function runChild(
  t: TestContext,
  args: readonly string[],
  env: Record<string, string> = {},
): Child {
  const child = spawnService({
    dataDir: args[1] ?? '',
    env,
    args: [CHILD, ...args],
  })
  t.after(() => {
    child.proc.kill('SIGKILL')
  })
  return child
}

/** SIGKILLs the child once it has printed `lines` acknowledgements after `ready`. */
async function killAfter(child: Child, lines: number): Promise<string[]> {
  const deadline = Date.now() + 30_000
  const acked = (): string[] =>
    child
      .stdout()
      .split('\n')
      .slice(1, -1)
      .filter((line) => line !== 'done')
  while (acked().length < lines) {
    if (exited(child) || Date.now() > deadline)
      throw new Error(`the key child stopped or stalled:\n${child.stderr()}`)
    await sleep(1)
  }
  child.proc.kill('SIGKILL')
  const exit = await child.exited
  assert.equal(exit.signal, 'SIGKILL', child.stderr())
  return acked()
}

/**
 * A data directory whose log ends, past its checkpoint, with the key `key` and its event's line as
 * `tail` writes them, then a whole keyed create: opened again, after checking that the whole one
 * was replayed with its key and that `key` is in no journal.
 */
async function keyedTail(
  t: TestContext,
  key: string,
  tail: (keyLine: string, event: { line: string; id: string }) => string,
) {
  const dataDir = await dataDirOf(t, `keys-${key}-`)
  const first = await openStore(t, dataDir)
  await first.store.create(makeUser())
  await first.close()
  const event = createdLine(dataDir, `${key} create`)
  const segment = lastSegment(dataDir)
  appendFileSync(segment, tail(keyLineFor(aloneKey('admin', key), event.id), event))
  const counted = createdLine(dataDir, 'Counted Create')
  const countedKey = aloneKey('admin', 'counted')
  appendFileSync(segment, `${keyLineFor(countedKey, counted.id)}${counted.line}\n`)
  const { store, logs } = await openStore(t, dataDir)
  assert.ok((await store.get(counted.userId)) !== undefined, 'the counted change was replayed')
  assert.deepEqual(await store.keys.find('admin', 'counted'), countedKey)
  assert.deepEqual(journalLines(dataDir, 'admin', key), [])
  return { dataDir, store, logs, event }
}

describe('FileStore: kept keys on disk', () => {
  it("keeps a keyed change's key as a line `<sha-256> <JSON>\\t<segment>:<offset>` of the journal of its expiry's 30 s (mode 0600), the offset its line's in the log, found by a new store on the same directory; the feed shows only the event", async (t) => {
    const dataDir = await dataDirOf(t, 'keys-restart-')
    const first = await openStore(t, dataDir)
    const idempotency = keyToKeep('admin-1', 'restart-key')
    const record = await first.store.create(makeUser(), undefined, { idempotency })
    await first.close()
    const kept = keptOnce(idempotency)
    const journal = journalOf(dataDir, kept.expiresAt)
    assert.deepEqual(keyFiles(dataDir), [path.basename(journal)], 'one journal, no file per key')
    assert.deepEqual(
      readFileSync(journal, 'utf8'),
      `${digestOf('admin-1', 'restart-key')} ${JSON.stringify(kept)}\t0000000000000001.ndjson:0\n`,
    )
    assert.ok(
      readFileSync(path.join(dataDir, 'events', '0000000000000001.ndjson'), 'utf8').startsWith(
        `{"key":${JSON.stringify(kept)},"for":"`,
      ),
      "the journal names where the key's line is in the log",
    )
    assert.equal(statSync(journal).mode & 0o777, 0o600)
    assert.equal(readLog(dataDir).events.length, 1, 'one event in the log')

    const second = await openStore(t, dataDir)
    assert.deepEqual(await second.store.keys.find('admin-1', 'restart-key'), kept)
    assert.deepEqual(await feed(second.store), [`user.created ${record.user.id}`])
    assert.equal(existsSync(path.join(dataDir, 'quarantine')), false, 'nothing quarantined')
    assert.deepEqual(
      second.logs.filter((line) => line['level'] === 'warn'),
      [],
      'the key line is no damage',
    )
  })

  it("fsyncs a change's key journal and keys/ in the checkpoint, before the checkpoint moves past its event", async (t) => {
    const dataDir = await dataDirOf(t, 'keys-checkpoint-')
    const timings: DurableWriteTiming[] = []
    const { store, close } = await openStore(t, dataDir, {
      checkpointMs: NO_CHECKPOINT,
      timings: (timing) => timings.push(timing),
    })
    const from = timings.length
    await store.create(makeUser(), undefined, { idempotency: keyToKeep('admin', 'synced') })
    // A clean stop runs a checkpoint past everything.
    await close()
    const seen = timings.slice(from).map((timing) => `${timing.kind} ${path.basename(timing.dir)}`)
    const checkpointWrite = seen.indexOf(`write ${path.basename(dataDir)}`)
    assert.ok(checkpointWrite > 0, seen.join(', '))
    const before = seen.slice(0, checkpointWrite)
    assert.ok(before.includes('file-sync keys'), `the journal is fsynced first: ${seen.join(', ')}`)
    assert.ok(before.includes('dir-sync keys'), `keys/ is fsynced first: ${seen.join(', ')}`)
    assert.equal(readCheckpointFile(dataDir), readLog(dataDir).highest)
  })

  it('finds every acknowledged key after a SIGKILL, each with exactly one event, and no key without its user', {
    timeout: 90_000,
  }, async (t) => {
    const dataDir = await dataDirOf(t, 'keys-kill-')
    // Killed right after one change resolved: its key file may not even be written yet.
    const one = runChild(t, ['write', dataDir, '1', 'one'], {
      CHECKPOINT_MS: String(NO_CHECKPOINT),
    })
    const acked = await killAfter(one, 1)
    // Then eight writers, killed while they run, checkpoints running back to back.
    const many = runChild(t, ['write', dataDir, '0', 'many'], { CHECKPOINT_MS: '50' })
    acked.push(...(await killAfter(many, 300)))
    const { store } = await openStore(t, dataDir)
    const events = await feed(store)
    /** The user of each key found, from its kept answer. */
    const users = new Map<string, string>()
    for (const key of [
      'one-0',
      ...Array.from({ length: acked.length + 100 }, (_, n) => `many-${n}`),
    ]) {
      const found = await store.keys.find('writer', key)
      if (found === undefined) continue
      assert.equal(found.answer.status, 201)
      const id = (JSON.parse(found.answer.body ?? '{}') as { id: string }).id
      users.set(id, key)
      assert.ok((await store.get(id)) !== undefined, `${key}'s user ${id} is not there`)
    }
    for (const line of acked) {
      const [key, userId] = line.split(' ')
      assert.equal(users.get(userId ?? ''), key, `${line}: acknowledged, its key is not found`)
    }
    assert.equal(store.count(), users.size, 'no user without its key')
    for (const id of users.keys()) {
      assert.deepEqual(
        events.filter((event) => event.endsWith(` ${id}`)),
        [`user.created ${id}`],
        `exactly one event for ${id}`,
      )
    }
  })

  it("reads the bodies of keyed changes' events from their segment, past their key lines (beyond the cache of the newest)", async (t) => {
    const dataDir = await dataDirOf(t, 'keys-bodies-')
    const { store } = await openStore(t, dataDir)
    const made = await store.create(
      makeUser({ name: 'Keyed', metadata: bigMetadata('k') }),
      undefined,
      {
        idempotency: keyToKeep('admin', 'body-0'),
      },
    )
    // About 2 MB of events: more than the cache of the newest bodies holds.
    for (let i = 1; i <= 40; i += 1) {
      await store.update(
        made.user.id,
        (current) =>
          changeUser(current.user, { metadata: { ...current.user.metadata, k01: `v${i}` } }),
        { idempotency: keyToKeep('admin', `body-${i}`) },
      )
    }
    const items = []
    let after: string | undefined
    for (;;) {
      const page = await store.events.read({ limit: 41, ...(after === undefined ? {} : { after }) })
      if (page.items.length === 0) break
      items.push(...page.items)
      after = page.nextCursor
    }
    assert.deepEqual(
      items.map((event) => `${event.type} ${event.version}`),
      ['user.created 1', ...Array.from({ length: 40 }, (_, i) => `user.updated ${i + 2}`)],
    )
    assert.equal((JSON.parse(items[0]?.userJson ?? '{}') as { name: string }).name, 'Keyed')
  })

  it('keeps neither a key nor its event when the append was torn, and never lends that key to a later event', async (t) => {
    const dataDir = await dataDirOf(t, 'keys-torn-')
    const first = await openStore(t, dataDir)
    await first.store.create(makeUser(), undefined, { idempotency: keyToKeep('admin', 'whole') })
    await first.close()
    const torn = createdLine(dataDir, 'Torn Create')
    const kept = aloneKey('admin', 'torn')
    const segment = lastSegment(dataDir)
    const size = statSync(segment).size
    // The key's line whole, its event's line cut short: a crash in the middle of the write.
    appendFileSync(segment, keyLineFor(kept, torn.id) + torn.line.slice(0, 80))

    const second = await openStore(t, dataDir)
    assert.ok(
      second.logs.some((line) => line['msg'] === TORN),
      'the torn event line was cut',
    )
    assert.equal(await second.store.keys.find('admin', 'torn'), undefined, 'no key')
    assert.equal(await second.store.get(torn.userId), undefined, 'no change')
    assert.ok(statSync(segment).size > size, 'the whole key line stays in the log')
    assert.doesNotMatch(logText(dataDir), /"key":"torn"/, 'blanked: its event never followed')
    assert.equal(blankedLines(dataDir).length, 1)
    // The next change takes an id past the key line's, so that it never follows as its event.
    const later = await second.store.create(makeUser())
    const laterEvent = readLog(dataDir).events.find((event) => event.userId === later.user.id)
    assert.ok(laterEvent !== undefined && laterEvent.id > torn.id, laterEvent?.id)
    await second.close()
    // Replayed from the start: the key still has no event of its own.
    writeFileSync(path.join(dataDir, 'checkpoint.json'), '{"through":"0000000000000000"}\n')
    const third = await openStore(t, dataDir)
    assert.equal(await third.store.keys.find('admin', 'torn'), undefined, 'still no key')
    assert.ok(await third.store.keys.find('admin', 'whole'))
    assert.deepEqual(journalLines(dataDir, 'admin', 'torn'), [])
  })

  it('keeps no key of a voided event, and keeps the key of the same lines without the void', async (t) => {
    const { store, event } = await keyedTail(
      t,
      'voided',
      (keyLine, { line, id }) => `${keyLine}${line}\n{"void":"${id}"}\n`,
    )
    assert.equal(await store.get(event.userId), undefined)
    assert.equal(await store.keys.find('admin', 'voided'), undefined, 'a voided event keeps no key')
  })

  it("keeps no key whose event's line does not begin as the log writes one: the replay makes no such event", async (t) => {
    // JSON.parse reads the event line with a space before its brace; the log never writes one.
    const { store, event, logs, dataDir } = await keyedTail(
      t,
      'damaged',
      (keyLine, { line }) => `${keyLine} ${line}\n`,
    )
    assert.equal(await store.get(event.userId), undefined, 'no change')
    assert.equal(await store.keys.find('admin', 'damaged'), undefined, 'no key')
    assert.doesNotMatch(logText(dataDir), /"key":"damaged"/, 'blanked: no event followed it')
    assert.deepEqual(
      logs
        .filter((line) => line['msg'] === 'quarantined a damaged event record')
        .map((line) => line['id']),
      [event.id],
    )
  })

  it('keeps no key whose event line gives another id first, though the id JSON.parse takes is its own', async (t) => {
    const { store, event } = await keyedTail(t, 'twice', (keyLine, { line, id }) => {
      const other = nextId(nextId(id))
      return `${keyLine}${line.replace('{"id":', `{"id":"${other}","id":`)}\n`
    })
    assert.equal(await store.get(event.userId), undefined, 'no change')
    assert.equal(await store.keys.find('admin', 'twice'), undefined, 'no key')
  })

  it('appends the lines of deleted journals again from the log when it replays past the checkpoint, and cuts a torn last line before appending after it', async (t) => {
    const dataDir = await dataDirOf(t, 'keys-replay-')
    const first = await openStore(t, dataDir, { checkpointMs: NO_CHECKPOINT })
    const idempotency = keyToKeep('admin', 'replayed')
    const record = await first.store.create(makeUser(), undefined, { idempotency })
    const updating = keyToKeep('admin', 'replayed-update')
    await first.store.update(
      record.user.id,
      (current) => changeUser(current.user, { name: 'Replayed' }),
      { idempotency: updating },
    )
    await first.close()
    const kept = keptOnce(idempotency)
    const journal = journalOf(dataDir, kept.expiresAt)
    rmSync(journal)
    // A power loss may lose lines appended after the checkpoint: this one is back to before both.
    writeFileSync(path.join(dataDir, 'checkpoint.json'), '{"through":"0000000000000000"}\n')
    // ...and may leave a journal's last append torn.
    const other = journalOf(dataDir, kept.expiresAt + 3_600_000)
    const whole = aloneKey('admin', 'whole-line', kept.expiresAt + 3_600_000)
    const wholeLine = `${digestOf('admin', 'whole-line')} ${JSON.stringify(whole)}\n`
    writeFileSync(other, `${wholeLine}${digestOf('admin', 'torn-line')} {"subj`)

    const second = await openStore(t, dataDir)
    const replayed = second.logs.find(
      (line) => line['msg'] === 'replayed the event log past its checkpoint',
    )
    assert.equal(replayed?.['keys'], 2)
    assert.deepEqual(journalLines(dataDir, 'admin', 'replayed'), [kept])
    assert.deepEqual(await second.store.keys.find('admin', 'replayed'), kept)
    assert.deepEqual(await second.store.keys.find('admin', 'replayed-update'), keptOnce(updating))
    // A torn last line is passed over by reads, and cut off before the next append there.
    assert.deepEqual(await second.store.keys.find('admin', 'whole-line'), whole)
    const next = aloneKey('admin', 'after-torn', kept.expiresAt + 3_600_000)
    await second.store.keys.keepAlone(next)
    assert.equal(
      readFileSync(other, 'utf8'),
      `${wholeLine}${digestOf('admin', 'after-torn')} ${JSON.stringify(next)}\n`,
      'the torn line cut off, the next line whole on a line of its own',
    )
    await second.close()
    const third = await openStore(t, dataDir)
    assert.deepEqual(await third.store.keys.find('admin', 'after-torn'), next)
    assert.deepEqual(await third.store.keys.find('admin', 'whole-line'), whole)
  })

  it('answers storage_unavailable and keeps no key when the fsync of a key kept alone fails', {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const dataDir = await dataDirOf(t, 'keys-fsync-')
    const marker = path.join(path.dirname(dataDir), 'fail-fsync')
    const env = shimEnv(shim.library, {
      failMarker: marker,
      failKind: 'file',
      failUnder: path.join(dataDir, 'keys'),
    })
    const child = runChild(t, ['alone', dataDir], env)
    const { code } = await child.exited
    assert.equal(code, 0, child.stderr())
    const lines = child.stdout().split('\n')
    assert.deepEqual(JSON.parse(lines[1] ?? ''), {
      name: 'ServiceError',
      code: 'storage_unavailable',
      outcome: null,
      health: 'read_only',
    })
    assert.equal(lines[2], 'found false')
    assert.ok(existsSync(marker), 'the fsync failed')
    rmSync(marker)
    assert.deepEqual(journalLines(dataDir, 'alone-subject', 'alone-1'), [], 'no line')
    assert.ok(
      keyFiles(dataDir).every((name) => name.endsWith('.keys')),
      `no key file, no temp file: ${keyFiles(dataDir).join(', ')}`,
    )
    const { store } = await openStore(t, dataDir)
    assert.equal(await store.keys.find('alone-subject', 'alone-1'), undefined)
  })

  it('finds a key whose journal line could not be written (its event durable) from memory, and the restart appends it from the log', {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const dataDir = await dataDirOf(t, 'keys-pinned-')
    const marker = path.join(path.dirname(dataDir), 'fail-open')
    const env = {
      ...shimEnv(shim.library, {
        failOpenMarker: marker,
        failUnder: path.join(dataDir, 'keys'),
        failErrno: constants.errno.ENOSPC,
      }),
      CHECKPOINT_MS: '50',
    }
    const child = runChild(t, ['pinned', dataDir], env)
    while (!child.stdout().includes('done\n')) {
      if (exited(child)) assert.fail(`the child stopped:\n${child.stderr()}`)
      await sleep(10)
    }
    const lines = child.stdout().split('\n')
    const userId = /^created (\S+)$/.exec(lines[1] ?? '')?.[1]
    assert.ok(userId !== undefined, child.stdout())
    assert.equal(lines[2], 'found true', 'found from memory, its line unwritten')
    child.proc.kill('SIGKILL')
    await child.exited
    assert.deepEqual(keyFiles(dataDir), [], 'no journal could be written')
    const event = readLog(dataDir).events.find((logged) => logged.userId === userId)
    assert.ok(event !== undefined)
    assert.ok(
      (readCheckpointFile(dataDir) ?? '') < event.id,
      'the checkpoint stayed behind the event whose key line is missing',
    )
    rmSync(marker)
    const { store } = await openStore(t, dataDir)
    const found = await store.keys.find('pinned-subject', 'pinned-1')
    assert.equal(found?.answer.status, 201)
    assert.equal(JSON.parse(found?.answer.body ?? '{}').id, userId)
    assert.deepEqual(
      journalLines(dataDir, 'pinned-subject', 'pinned-1'),
      [found],
      'appended by the replay',
    )
  })

  it('deletes a journal once its 30 s of expiries have passed, within the sweep interval, never one with a key still kept', async (t) => {
    const dataDir = await dataDirOf(t, 'keys-sweep-')
    const span = 30_000
    // Early in a span: keys a few seconds apart share a journal.
    let clock = Math.floor(Date.now() / span) * span + 1_000
    const { store } = await openStore(t, dataDir, { now: () => clock, keySweepMs: 50 })
    const short = clock + span + 2_000
    await store.keys.keepAlone(aloneKey('admin', 'alone-short', short))
    await store.create(makeUser(), undefined, {
      idempotency: keyToKeep('admin', 'change-short', { expiresAt: short + 1_000 }),
    })
    const long = aloneKey('admin', 'long', clock + 5 * span)
    await store.keys.keepAlone(long)
    const shortJournal = path.basename(journalOf(dataDir, short))
    const longJournal = path.basename(journalOf(dataDir, long.expiresAt))
    assert.deepEqual(keyFiles(dataDir), [shortJournal, longJournal])

    // Expired, but their journal's span has not passed: found no more, and the journal stays.
    clock = short + 1_500
    assert.equal(await store.keys.find('admin', 'alone-short'), undefined)
    await sleep(200)
    assert.deepEqual(keyFiles(dataDir), [shortJournal, longJournal], 'within its span, it stays')

    clock += span
    // The sweep runs every 50 ms; its fsyncs may take seconds on a loaded disk.
    const deadline = Date.now() + 10_000
    while (keyFiles(dataDir).length > 1 && Date.now() < deadline) await sleep(10)
    assert.deepEqual(keyFiles(dataDir), [longJournal])
    assert.equal(await store.keys.find('admin', 'alone-short'), undefined)
    assert.equal(await store.keys.find('admin', 'change-short'), undefined)
    assert.deepEqual(await store.keys.find('admin', 'long'), long)
  })

  it('holds a cache of kept keys bounded in bytes, and finds the rest in their journals', async (t) => {
    const dataDir = await dataDirOf(t, 'keys-cache-')
    const budget = 64 * 1024
    const { store } = await openStore(t, dataDir, { keyCacheBytes: budget })
    const made = await store.create(makeUser())
    const kept: KeptKey[] = []
    for (let n = 0; n < 300; n += 10) {
      await Promise.all(
        Array.from({ length: 10 }, async (_, i) => {
          const idempotency = keyToKeep('admin', `cached-${n + i}`)
          if (i === 0) {
            await store.update(
              made.user.id,
              (current) => changeUser(current.user, { metadata: { n: String(n) } }),
              { idempotency },
            )
          } else {
            await store.keys.keepAlone(aloneKey('admin', `cached-${n + i}`))
          }
          const logged = idempotency.kept[0]
          if (logged !== undefined) kept[n + i] = logged
        }),
      )
      assert.ok(store.keyFiles.cachedBytes <= budget, `${store.keyFiles.cachedBytes} bytes`)
    }
    assert.ok(store.keyFiles.cachedBytes > budget / 2, 'the cache is used')
    for (let n = 0; n < 300; n += 1) {
      const found = await store.keys.find('admin', `cached-${n}`)
      assert.equal(found?.key, `cached-${n}`)
      if (n % 10 === 0) assert.deepEqual(found, kept[n])
      assert.ok(store.keyFiles.cachedBytes <= budget)
    }
  })
})

describe('FileStore: the filter of kept keys', () => {
  /** Waits for the sweep at open to have listed the key files. */
  async function filtering(store: FileStore): Promise<void> {
    const deadline = Date.now() + 5_000
    while (!store.keyFiles.filtering && Date.now() < deadline) await sleep(5)
    assert.ok(store.keyFiles.filtering, 'the sweep at open built the filter')
  }

  it('does not look on disk for a key it never kept, and sees the journals the next open read', async (t) => {
    const dataDir = await dataDirOf(t, 'keys-filter-')
    const first = await openStore(t, dataDir, { keySweepMs: NO_CHECKPOINT })
    await filtering(first.store)
    const kept = aloneKey('admin', 'kept')
    await first.store.keys.keepAlone(kept)
    // A line put in behind the store's back: no key of this store's, so never looked for.
    const stranger = aloneKey('admin', 'stranger', kept.expiresAt)
    appendFileSync(
      journalOf(dataDir, stranger.expiresAt),
      `${digestOf('admin', 'stranger')} ${JSON.stringify(stranger)}\n`,
    )
    assert.equal(await first.store.keys.find('admin', 'stranger'), undefined)
    assert.equal((await first.store.keys.find('admin', 'kept'))?.key, 'kept')
    await first.close()

    // The next open reads every journal, the stranger's line too.
    const second = await openStore(t, dataDir, { keySweepMs: NO_CHECKPOINT })
    await filtering(second.store)
    assert.deepEqual(await second.store.keys.find('admin', 'stranger'), stranger)
    assert.equal((await second.store.keys.find('admin', 'kept'))?.key, 'kept')
    assert.equal(await second.store.keys.find('admin', 'never'), undefined)
  })

  it('reads only the journals whose own filter may hold the key: a line put into another journal by hand is passed by', async (t) => {
    const dataDir = await dataDirOf(t, 'keys-journal-filter-')
    // No cache: every lookup goes to the journals.
    const { store } = await openStore(t, dataDir, { keySweepMs: NO_CHECKPOINT, keyCacheBytes: 1 })
    await filtering(store)
    const kept = aloneKey('admin', 'older-journal')
    await store.keys.keepAlone(kept)
    const later = aloneKey('admin', 'newer-journal', kept.expiresAt + 120_000)
    await store.keys.keepAlone(later)
    // The newer journal, read first, gets a line for the first key that the store never wrote.
    const forged = { ...kept, answer: { ...kept.answer, body: '{"forged":true}' } }
    appendFileSync(
      journalOf(dataDir, later.expiresAt),
      `${digestOf('admin', 'older-journal')} ${JSON.stringify(forged)}\n`,
    )
    assert.deepEqual(await store.keys.find('admin', 'older-journal'), kept)
    assert.deepEqual(await store.keys.find('admin', 'newer-journal'), later)
  })

  it('builds the filter even when an expired journal cannot be deleted, and says so', async (t) => {
    const dataDir = await dataDirOf(t, 'keys-undeletable-')
    const first = await openStore(t, dataDir, { keySweepMs: NO_CHECKPOINT })
    const kept = aloneKey('admin', 'kept')
    await first.store.keys.keepAlone(kept)
    await first.close()
    // A journal's name, long expired, that unlink refuses (a directory).
    mkdirSync(path.join(dataDir, 'keys', '20200101T000000.keys'))
    const { store, logs } = await openStore(t, dataDir, { keySweepMs: NO_CHECKPOINT })
    await filtering(store)
    // The filter is read first; the deletions, and their failure, come after it.
    const said = (): boolean =>
      logs.some((line) => line['msg'] === 'could not delete expired idempotency keys')
    const deadline = Date.now() + 5_000
    while (!said() && Date.now() < deadline) await sleep(5)
    assert.ok(said(), JSON.stringify(logs))
    assert.deepEqual(await store.keys.find('admin', 'kept'), kept)
    assert.equal(await store.keys.find('admin', 'never'), undefined)
  })

  it('finds every kept key after the cache forgot it, through sweeps and false positives', async (t) => {
    const dataDir = await dataDirOf(t, 'keys-filter-small-')
    // 256 bits for 120 keys: most names it has not seen still say "maybe", and are looked for.
    const { store } = await openStore(t, dataDir, {
      keySweepMs: 20,
      keyCacheBytes: 8 * 1024,
      keyFilterBits: 8,
    })
    const made = await store.create(makeUser())
    for (let n = 0; n < 120; n += 1) {
      const idempotency = keyToKeep('admin', `many-${n}`)
      if (n % 3 === 0)
        await store.update(
          made.user.id,
          (current) => changeUser(current.user, { metadata: { n: String(n) } }),
          { idempotency },
        )
      else await store.keys.keepAlone(aloneKey('admin', `many-${n}`))
    }
    await sleep(100)
    await filtering(store)
    for (let n = 0; n < 120; n += 1)
      assert.equal((await store.keys.find('admin', `many-${n}`))?.key, `many-${n}`, `many-${n}`)
    for (let n = 0; n < 50; n += 1)
      assert.equal(await store.keys.find('admin', `none-${n}`), undefined)
  })
})

describe("FileStore: the log's copies of expired keys", () => {
  const SPAN = 30_000
  const segmentSizes = (dataDir: string): number[] =>
    readLog(dataDir).segments.map((name) => statSync(path.join(dataDir, 'events', name)).size)

  it("blanks the log's copy of a key kept with a change once its journal's span has passed (the same bytes: null and spaces), then deletes the journal; the events stay, and a restart reads the log whole", async (t) => {
    const dataDir = await dataDirOf(t, 'keys-blank-')
    let clock = Math.floor(Date.now() / SPAN) * SPAN + 1_000
    const first = await openStore(t, dataDir, { now: () => clock, keySweepMs: 50 })
    const short = clock + SPAN + 2_000
    const made = await first.store.create(makeUser(), undefined, {
      idempotency: keyToKeep('admin', 'copy-short', { expiresAt: short }),
    })
    const longKey = keyToKeep('admin', 'copy-long', { expiresAt: clock + 5 * SPAN })
    await first.store.update(made.user.id, (current) => changeUser(current.user, { name: 'B' }), {
      idempotency: longKey,
    })
    // The journal lines are appended after the answers: wait for both journals.
    const appended = Date.now() + 5_000
    while (keyFiles(dataDir).length < 2 && Date.now() < appended) await sleep(10)
    assert.equal(keyFiles(dataDir).length, 2)
    const sizes = segmentSizes(dataDir)
    assert.match(logText(dataDir), /"key":"copy-short"/)
    assert.deepEqual(blankedLines(dataDir), [])

    clock = short + SPAN
    // The sweep runs every 50 ms; its fsyncs may take seconds on a loaded disk.
    const deadline = Date.now() + 10_000
    while (keyFiles(dataDir).length > 1 && Date.now() < deadline) await sleep(10)
    assert.deepEqual(keyFiles(dataDir), [path.basename(journalOf(dataDir, clock + 3 * SPAN))])
    const text = logText(dataDir)
    assert.doesNotMatch(text, /copy-short/, "the expired key's text is gone from the log")
    assert.match(text, /"key":"copy-long"/, 'a key still kept keeps its copy')
    assert.equal(blankedLines(dataDir).length, 1)
    assert.deepEqual(segmentSizes(dataDir), sizes, 'no byte moved')
    const events = [`user.created ${made.user.id}`, `user.updated ${made.user.id}`]
    assert.deepEqual(await feed(first.store), events)
    assert.equal(await first.store.keys.find('admin', 'copy-short'), undefined)
    await first.close()

    const second = await openStore(t, dataDir, { now: () => clock })
    assert.deepEqual(await feed(second.store), events)
    assert.equal(second.logs.find((line) => line['msg'] === 'events loaded')?.['damaged'], 0)
    assert.equal(existsSync(path.join(dataDir, 'quarantine')), false, 'nothing quarantined')
    assert.deepEqual(await second.store.keys.find('admin', 'copy-long'), keptOnce(longKey))
  })

  it('overwrites nothing where a journal names a place that does not hold its key line, or a segment that is gone', async (t) => {
    const dataDir = await dataDirOf(t, 'keys-blank-elsewhere-')
    let clock = Math.floor(Date.now() / SPAN) * SPAN + 1_000
    const { store } = await openStore(t, dataDir, { now: () => clock, keySweepMs: 50 })
    await store.create(makeUser())
    const stranger = aloneKey('admin', 'stranger', clock + 2_000)
    const json = JSON.stringify(stranger)
    const before = logText(dataDir)
    // The first line of the log is an event's; another segment does not exist.
    const lines = [
      `${digestOf('admin', 'stranger')} ${json}\t0000000000000001.ndjson:0\n`,
      `${digestOf('admin', 'stranger')} ${json}\t00000000000000ff.ndjson:0\n`,
    ]
    writeFileSync(journalOf(dataDir, stranger.expiresAt), lines.join(''))

    clock += 2 * SPAN
    // The sweep runs every 50 ms; its fsyncs may take seconds on a loaded disk.
    const deadline = Date.now() + 10_000
    while (keyFiles(dataDir).length > 0 && Date.now() < deadline) await sleep(10)
    assert.deepEqual(keyFiles(dataDir), [], 'the journal is deleted')
    assert.equal(logText(dataDir), before, 'the log is as it was')
  })

  it('reads a key line whose blanking a crash tore as a key line: no damage, no key replayed from it', async (t) => {
    const dataDir = await dataDirOf(t, 'keys-blank-torn-')
    let clock = Math.floor(Date.now() / SPAN) * SPAN + 1_000
    const first = await openStore(t, dataDir, { now: () => clock, checkpointMs: NO_CHECKPOINT })
    const idempotency = keyToKeep('admin', 'torn-blank', { expiresAt: clock + 2_000 })
    const made = await first.store.create(makeUser(), undefined, { idempotency })
    await first.close()
    // The overwrite reached the disk in part: `null`, some spaces, then the rest of the key.
    const segment = path.join(dataDir, 'events', '0000000000000001.ndjson')
    const bytes = readFileSync(segment)
    Buffer.from('null          ', 'latin1').copy(bytes, '{"key":'.length)
    writeFileSync(segment, bytes)
    writeFileSync(path.join(dataDir, 'checkpoint.json'), '{"through":"0000000000000000"}\n')

    clock += 2 * SPAN
    const second = await openStore(t, dataDir, { now: () => clock })
    assert.deepEqual(await feed(second.store), [`user.created ${made.user.id}`])
    assert.equal(second.logs.find((line) => line['msg'] === 'events loaded')?.['damaged'], 0)
    assert.equal(existsSync(path.join(dataDir, 'quarantine')), false, 'nothing quarantined')
    const replayed = second.logs.find(
      (line) => line['msg'] === 'replayed the event log past its checkpoint',
    )
    assert.equal(replayed?.['keys'], 0)
    assert.equal(await second.store.keys.find('admin', 'torn-blank'), undefined)
  })

  it('blanks the copies of many keys, large and small, in two segments, a batch at a time', {
    timeout: 120_000,
  }, async (t) => {
    const dataDir = await dataDirOf(t, 'keys-blank-many-')
    const HOUR = 3_600_000
    let clock = Math.floor(Date.now() / SPAN) * SPAN + 1_000
    const expiresAt = clock + 3 * HOUR
    const first = await openStore(t, dataDir, { now: () => clock, keySweepMs: 50 })
    const keep = async (prefix: string, count: number, big: boolean): Promise<void> => {
      let next = 0
      const writer = async (): Promise<void> => {
        for (let n = next++; n < count; n = next++) {
          const user = big ? makeUser({ metadata: bigMetadata(`${prefix}${n}`) }) : makeUser()
          const idempotency = keyToKeep('many', `${prefix}-${n}`, { expiresAt })
          await first.store.create(user, undefined, { idempotency })
        }
      }
      await Promise.all(Array.from({ length: 16 }, writer))
    }
    // Large keys (about 50 KB each, past one read's MiB) and more keys than one batch.
    await keep('big-a', 30, true)
    await keep('small', 600, false)
    // Segments last an hour: the next append starts a new one.
    clock += 2 * HOUR
    await keep('big-b', 30, true)
    assert.equal(readLog(dataDir).segments.length, 2)
    const journal = journalOf(dataDir, expiresAt)
    const lines = (): number =>
      existsSync(journal) ? readFileSync(journal, 'utf8').split('\n').length - 1 : 0
    const appended = Date.now() + 10_000
    while (lines() < 660 && Date.now() < appended) await sleep(10)
    assert.equal(lines(), 660)

    clock = expiresAt + 2 * SPAN
    const deadline = Date.now() + 30_000
    while (keyFiles(dataDir).length > 0 && Date.now() < deadline) await sleep(20)
    assert.deepEqual(keyFiles(dataDir), [])
    assert.doesNotMatch(logText(dataDir), /"key":"(big-a|small|big-b)-/)
    assert.equal(blankedLines(dataDir).length, 660)
    await first.close()
    const second = await openStore(t, dataDir, { now: () => clock })
    const loaded = second.logs.find((line) => line['msg'] === 'events loaded')
    assert.equal(loaded?.['events'], 660)
    assert.equal(loaded?.['damaged'], 0)
  })

  it("turns the store read-only and keeps the journal when the blanked segment's fdatasync fails; the next start blanks it again, syncs and deletes it", {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const dataDir = await dataDirOf(t, 'keys-blank-sync-')
    const marker = path.join(path.dirname(dataDir), 'fail-sync')
    const env = shimEnv(shim.library, {
      failMarker: marker,
      failUnder: path.join(dataDir, 'events'),
      failKind: 'file',
    })
    const child = runChild(t, ['blank', dataDir], env)
    while (!child.stdout().includes('done\n')) {
      if (exited(child)) assert.fail(`the child stopped:\n${child.stderr()}`)
      await sleep(10)
    }
    // Nothing more is deleted or blanked while read-only, even once syncs work again.
    assert.deepEqual(child.stdout().split('\n').slice(1, 3), [
      'journals 1 read_only',
      'journals 1 read_only',
    ])
    child.proc.kill('SIGKILL')
    await child.exited
    const later = Date.now() + 10 * 60_000
    const { store, logs } = await openStore(t, dataDir, { now: () => later, keySweepMs: 50 })
    const deadline = Date.now() + 5_000
    while (keyFiles(dataDir).length > 0 && Date.now() < deadline) await sleep(10)
    assert.deepEqual(keyFiles(dataDir), [])
    assert.doesNotMatch(logText(dataDir), /blank-1/)
    assert.equal(blankedLines(dataDir).length, 1)
    assert.equal(store.health().state, 'ok')
    assert.deepEqual(
      logs.filter((line) => line['level'] !== 'info'),
      [],
    )
  })

  it('finds a kept key at open without waiting for the sweep that blanks a passed journal (its fdatasync slow)', {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const dataDir = await dataDirOf(t, 'keys-blank-first-find-')
    const clock = Math.floor(Date.now() / SPAN) * SPAN + 1_000
    const first = await openStore(t, dataDir, { now: () => clock })
    const passing = keyToKeep('find-subject', 'passing', { expiresAt: clock + 2_000 })
    await first.store.create(makeUser(), undefined, { idempotency: passing })
    await first.store.keys.keepAlone(aloneKey('find-subject', 'lasting', clock + 10 * SPAN))
    await first.close()
    assert.equal(keyFiles(dataDir).length, 2)
    const env = {
      ...shimEnv(shim.library, { dataSyncDelayMs: 3_000 }),
      KEY_CHILD_NOW: String(clock + 3 * SPAN),
    }
    const child = runChild(t, ['first-find', dataDir], env)
    while (!child.stdout().includes('done\n')) {
      if (exited(child)) assert.fail(`the child stopped:\n${child.stderr()}`)
      await sleep(10)
    }
    assert.deepEqual(child.stdout().split('\n').slice(1, 3), ['found true journals 2', 'swept'])
    assert.doesNotMatch(logText(dataDir), /"key":"passing"/)
  })

  it("blanks, as it replays the log, the line of a key that expired while stopped, and gives a key it appends again its log line's place", async (t) => {
    const dataDir = await dataDirOf(t, 'keys-blank-replay-')
    let clock = Math.floor(Date.now() / SPAN) * SPAN + 1_000
    const first = await openStore(t, dataDir, { now: () => clock, checkpointMs: NO_CHECKPOINT })
    const expiring = keyToKeep('admin', 'expires-stopped', { expiresAt: clock + 2_000 })
    const made = await first.store.create(makeUser(), undefined, { idempotency: expiring })
    const lasting = keyToKeep('admin', 'lasts', { expiresAt: clock + 10 * SPAN })
    await first.store.update(made.user.id, (current) => changeUser(current.user, { name: 'L' }), {
      idempotency: lasting,
    })
    await first.close()
    // A power loss took the journals' lines and the checkpoint back: the replay has only the log.
    for (const name of keyFiles(dataDir)) rmSync(path.join(dataDir, 'keys', name))
    writeFileSync(path.join(dataDir, 'checkpoint.json'), '{"through":"0000000000000000"}\n')

    clock += 2 * SPAN
    const second = await openStore(t, dataDir, { now: () => clock })
    const text = logText(dataDir)
    assert.doesNotMatch(text, /expires-stopped/, 'the expired key is blanked by the replay')
    assert.equal(blankedLines(dataDir).length, 1)
    const kept = keptOnce(lasting)
    const line = readFileSync(journalOf(dataDir, kept.expiresAt), 'utf8')
    const place = /\t([0-9a-f]{16}\.ndjson):(\d+)\n$/.exec(line)
    assert.ok(place !== null, line)
    const at = Number(place[2])
    assert.equal(
      text.slice(at, at + `{"key":${JSON.stringify(kept)}`.length),
      `{"key":${JSON.stringify(kept)}`,
      "the replayed journal line names its key line's place",
    )
    assert.deepEqual(await second.store.keys.find('admin', 'lasts'), kept)
  })
})
