/**
 * The file store's recovery path (CONTRACT §7 recipe b, §10): the event log is the write-ahead log,
 * user files are renamed into place unsynced, a checkpoint makes them durable later, and the log's
 * tail past it is replayed at open. Real child processes are SIGKILLed, and the files a power loss
 * can leave are made by hand; every restart must end with every acknowledged change there, no file
 * torn or quarantined, the checkpoint past the whole log, and exactly one event per change.
 */
import assert from 'node:assert/strict'
import {
  appendFileSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  watch,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import { FileStore } from '../../src/store/file/file-store.js'
import { spawnService, startChild, waitForOutput } from '../helpers/child.js'
import { assertProblem, request } from '../helpers/http.js'
import { makeTempDir } from '../helpers/service.js'
import { changeUser, makeUser } from '../helpers/store-users.js'
import { makeToken } from '../helpers/tokens.js'
import {
  CHECKPOINT_TEMP,
  fileInodes,
  type LoggedEvent,
  lastEvents,
  readCheckpointFile,
  readLog,
  revertPastCheckpoint,
} from '../helpers/wal-disk.js'
import { Acked, runWriter, TORN_LINE_CUT as TORN, verifyStore } from '../helpers/wal-recovery.js'

/** Long enough that no checkpoint runs while a test writes: the whole tail waits for a replay. */
const NO_CHECKPOINT = 3_600_000
const ZERO = '0000000000000000'
const REPLAYED = 'replayed the event log past its checkpoint'

const userPath = (dataDir: string, id: string, folder = 'users'): string =>
  path.join(dataDir, folder, `${id}.json`)

/** The id after `id`, as the log writes ids. */
const nextId = (id: string): string => (BigInt(`0x${id}`) + 1n).toString(16).padStart(16, '0')

/** Makes users in-process and stops cleanly (a checkpoint past everything): the state behind the log's tail. */
async function writeCheckpointed(dataDir: string, acked: Acked): Promise<void> {
  const store = new FileStore({ dataDir, checkpointMs: NO_CHECKPOINT })
  await store.open()
  try {
    for (let i = 0; i < 24; i += 1) {
      let record = await store.create(makeUser())
      acked.add(record.user.id, 1)
      for (let n = 0; n < i % 3; n += 1) {
        record = await store.update(record.user.id, (current) =>
          changeUser(current.user, { name: `Before ${i}.${n}` }),
        )
        acked.add(record.user.id, record.user.version)
      }
      if (i % 8 === 7) {
        await store.delete(record.user.id)
        acked.add(record.user.id, record.user.version + 1, true)
      }
    }
  } finally {
    await store.close()
  }
}

describe('the write-ahead log after SIGKILL', () => {
  it('keeps every acknowledged change when the kill lands while checkpoints run back to back', {
    timeout: 60_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'wal-checkpoint-'), 'data')
    const acked = new Acked()
    const rounds: string[] = []
    // Varied moments, from the first changes to a directory of several hundred users. Every other
    // round is killed as a checkpoint starts writing its file; rounds 3, 4, 7 and 8 then lose, as
    // a power loss may, everything renamed past the checkpoint.
    for (const [index, killAfter] of [40, 400, 7, 900, 150, 1500, 60, 600].entries()) {
      const label = `round ${index + 1}`
      const before = readCheckpointFile(dataDir) ?? ZERO
      const count = await runWriter(t, dataDir, acked, {
        seed: index + 1,
        checkpointMs: 1,
        killAfter,
        atCheckpointWrite: index % 2 === 1,
      })
      assert.ok(count >= killAfter, `${label}: ${count} changes acknowledged`)
      const at = readCheckpointFile(dataDir)
      assert.ok(at !== undefined && at !== 'damaged', `${label}: checkpoint file ${String(at)}`)
      const highest = readLog(dataDir).highest
      const writing = readdirSync(dataDir).some((name) => CHECKPOINT_TEMP.test(name))
      const lost = index % 4 >= 2 ? revertPastCheckpoint(dataDir) : 0
      rounds.push(
        `${label}: checkpoint ${at > before ? 'moved' : 'stayed'}, ${at < highest ? 'a tail' : 'no tail'}${writing ? ', its file half written' : ''}, ${lost} users put back`,
      )
      await verifyStore(dataDir, acked, { label, exact: false })
    }
    t.diagnostic(rounds.join('; '))
    // Checkpoints ran during the round and the kill left a tail past the last one.
    const cut = rounds.filter((round) => round.includes('moved, a tail'))
    assert.ok(
      cut.length >= 5,
      `checkpoints did not run while changes were made: ${rounds.join('; ')}`,
    )
    const midWrite = rounds.filter((round) => round.includes('half written'))
    assert.ok(midWrite.length >= 1, `no kill during a checkpoint's write: ${rounds.join('; ')}`)
    assert.ok(rounds.some((round) => !round.endsWith(' 0 users put back')))
  })

  it('replays again after a kill during the replay, and ends exact with the checkpoint past the log', {
    timeout: 60_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'wal-replay-'), 'data')
    const usersDir = path.join(dataDir, 'users')
    const acked = new Acked()
    await runWriter(t, dataDir, acked, {
      seed: 11,
      checkpointMs: NO_CHECKPOINT,
      limit: 3000,
      creates: 0.7,
    })
    const checkpoint = readCheckpointFile(dataDir)
    assert.equal(checkpoint, ZERO, 'a checkpoint ran while the tail was written')
    // As a power loss leaves files renamed but never synced: only the replay brings them back.
    const emptied = [...acked.versions.keys()].filter((_, i) => i % 50 === 0)
    for (const id of emptied) truncateSync(userPath(dataDir, id), 0)

    const outcomes: string[] = []
    // Kill after this many changes in users/ (about four per user the replay writes), or once it
    // has been quiet for a while after many (the replay's fsyncs), or when the replay is over.
    for (const killAt of [1, 1500, 6000, 'quiet'] as const) {
      const inodes = fileInodes(dataDir)
      const child = spawnService({ dataDir, env: { CHECKPOINT_MS: String(NO_CHECKPOINT) } })
      t.after(() => {
        child.proc.kill('SIGKILL')
      })
      let seen = 0
      let quiet: NodeJS.Timeout | undefined
      const watcher = watch(usersDir)
      const kill = (): void => {
        child.proc.kill('SIGKILL')
      }
      watcher.on('change', () => {
        seen += 1
        if (killAt === 'quiet') {
          clearTimeout(quiet)
          if (seen > 1000) quiet = setTimeout(kill, 40)
        } else if (seen >= killAt) {
          kill()
        }
      })
      const over = waitForOutput(child, '"msg":"events loaded"', 30_000).then(kill, kill)
      await child.exited
      watcher.close()
      clearTimeout(quiet)
      await over
      const moved = readCheckpointFile(dataDir) !== checkpoint
      const now = fileInodes(dataDir)
      const rewritten = [...now].filter(([name, ino]) => inodes.get(name) !== ino).length
      outcomes.push(
        `${killAt}: ${rewritten} files written again, checkpoint ${moved ? 'moved' : 'not moved'}`,
      )
    }
    t.diagnostic(`kills: ${outcomes.join('; ')}`)
    const finished = outcomes.some((outcome) => outcome.endsWith(' moved'))

    const logs = await verifyStore(dataDir, acked, { label: 'after the replay', exact: true })
    const replayed = logs.find((line) => line['msg'] === REPLAYED)
    if (!finished) assert.equal(replayed?.['events'], readLog(dataDir).events.length)
    const midReplay = outcomes.filter((outcome) =>
      / [1-9]\d* files written again, checkpoint not/.test(outcome),
    )
    assert.ok(midReplay.length >= 2, `too few kills landed mid-replay: ${outcomes.join('; ')}`)
    for (const id of emptied) assert.ok(readFileSync(userPath(dataDir, id)).length > 0)
  })

  it('cuts a torn last log record, never acknowledged, and replays nothing of it', {
    timeout: 60_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'wal-torn-'), 'data')
    const acked = new Acked()
    /** Appends `text` to the newest segment; then, once open, it must be cut away again. */
    const tear = (text: string): (() => void) => {
      const log = readLog(dataDir)
      const segment = path.join(dataDir, 'events', log.segments.at(-1) ?? '')
      const size = statSync(segment).size
      appendFileSync(segment, text)
      return () => {
        assert.equal(statSync(segment).size, size, 'the torn record is still in the log')
        assert.equal(readLog(dataDir).highest, log.highest, 'the torn event is in the log')
      }
    }

    // A whole event but for its newline: a replay that took it would move the user on.
    await runWriter(t, dataDir, acked, { seed: 21, checkpointMs: NO_CHECKPOINT, limit: 300 })
    const last = [...lastEvents(readLog(dataDir)).values()].find(
      (event) => acked.versions.has(event.userId) && event.user !== undefined,
    )
    assert.ok(last?.user !== undefined, 'no live user in the log')
    const userId = last.userId
    const version = last.version + 1
    const cutFirst = tear(
      JSON.stringify({
        ...(JSON.parse(last.line) as LoggedEvent),
        id: nextId(readLog(dataDir).highest),
        type: 'user.updated',
        version,
        changed: ['name'],
        user: { ...last.user, name: 'Torn Record', version },
      }),
    )
    const logs = await verifyStore(dataDir, acked, {
      label: 'a whole record without its newline',
      exact: true,
      warnings: [TORN],
    })
    assert.ok(
      logs.some((line) => line['msg'] === TORN),
      'the torn record was not cut',
    )
    cutFirst()
    assert.doesNotMatch(readFileSync(userPath(dataDir, userId), 'utf8'), /Torn Record/)

    // Half a create of a user never made, after more changes appended behind the cut.
    await runWriter(t, dataDir, acked, { seed: 22, checkpointMs: NO_CHECKPOINT, limit: 300 })
    const created = readLog(dataDir).events.find((event) => event.type === 'user.created')
    assert.ok(created?.user !== undefined, 'no create in the log')
    const ghost = makeUser({ name: 'Torn Create' })
    const record = JSON.stringify({
      ...(JSON.parse(created.line) as LoggedEvent),
      id: nextId(readLog(dataDir).highest),
      userId: ghost.id,
      user: ghost,
    })
    const cutSecond = tear(record.slice(0, Math.floor(record.length * 0.6)))
    await verifyStore(dataDir, acked, { label: 'half a record', exact: true, warnings: [TORN] })
    cutSecond()
    assert.throws(() => readFileSync(userPath(dataDir, ghost.id)), { code: 'ENOENT' })
  })

  it('repairs every user file a power loss can leave past the checkpoint, deletions included', {
    timeout: 60_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'wal-power-'), 'data')
    const acked = new Acked()
    await writeCheckpointed(dataDir, acked)
    const checkpoint = readCheckpointFile(dataDir) ?? ''
    await runWriter(t, dataDir, acked, { seed: 31, checkpointMs: NO_CHECKPOINT, limit: 400 })
    assert.equal(
      readCheckpointFile(dataDir),
      checkpoint,
      'a checkpoint ran while the tail was written',
    )

    const log = readLog(dataDir)
    const last = lastEvents(log)
    const inTail = [...last.values()].filter((event) => event.id > checkpoint)
    const updated = inTail.filter((event) => event.type !== 'user.deleted' && event.version >= 3)
    const createdOnly = inTail.filter((event) => event.type === 'user.created')
    const deleted = inTail.filter((event) => event.type === 'user.deleted')
    assert.ok(
      updated.length >= 8 && createdOnly.length >= 1 && deleted.length >= 3,
      'tail too small',
    )
    const take = <T>(list: T[]): T => {
      const item = list.shift()
      if (item === undefined) throw new Error('not enough users in the tail')
      return item
    }
    const userAt = (userId: string, version: number): Record<string, unknown> => {
      const event = log.events.find((e) => e.userId === userId && e.version === version)
      if (event?.user === undefined) throw new Error(`no event of ${userId} v${version}`)
      return event.user
    }
    const repaired: string[] = []
    for (let i = 0; i < 2; i += 1) {
      const empty = take(updated).userId
      truncateSync(userPath(dataDir, empty), 0)
      const garbage = take(updated).userId
      writeFileSync(userPath(dataDir, garbage), Buffer.from([0, 0xff, 0x7b, 0x22, 0, 0, 0, 0]))
      const half = take(updated).userId
      const text = readFileSync(userPath(dataDir, half), 'utf8')
      writeFileSync(userPath(dataDir, half), text.slice(0, text.length >> 1))
      repaired.push(empty, garbage, half)
    }
    // The rename of the newest version lost: the one before it is back.
    const older = take(updated)
    writeFileSync(
      userPath(dataDir, older.userId),
      JSON.stringify(userAt(older.userId, older.version - 1)),
    )
    // A create whose rename was lost altogether.
    const lost = take(createdOnly).userId
    rmSync(userPath(dataDir, lost))
    repaired.push(older.userId, lost)
    // A deletion whose tombstone and unlink were both lost: the user file is back, no tombstone.
    const risen = take(deleted)
    writeFileSync(
      userPath(dataDir, risen.userId),
      JSON.stringify(userAt(risen.userId, risen.version - 1)),
    )
    rmSync(userPath(dataDir, risen.userId, 'tombstones'))
    // Only the tombstone lost; and one left empty.
    const unburied = take(deleted).userId
    rmSync(userPath(dataDir, unburied, 'tombstones'))
    const emptyGrave = take(deleted).userId
    truncateSync(userPath(dataDir, emptyGrave, 'tombstones'), 0)

    const service = await startChild({ dataDir })
    t.after(() => service.stop('SIGKILL'))
    const token = makeToken()
    for (const id of repaired) {
      const res = await request('GET', `${service.url}/users/${id}`, { token })
      assert.equal(res.status, 200, `${id}: ${res.text}`)
      assert.deepEqual(res.json(), last.get(id)?.user, `${id} is not as acknowledged`)
    }
    const alive = repaired[0] ?? ''
    for (const id of [risen.userId, unburied, emptyGrave]) {
      assertProblem(await request('GET', `${service.url}/users/${id}`, { token }), 404, 'not_found')
      assertProblem(
        await request('DELETE', `${service.url}/users/${id}`, { token }),
        404,
        'not_found',
      )
      // The tombstone is back: the deleted user's tokens stay refused (§9).
      const theirs = makeToken({ sub: id })
      const res = await request('GET', `${service.url}/users/${alive}`, { token: theirs })
      assertProblem(res, 403, 'subject_deleted')
    }
    assert.doesNotMatch(service.stdout(), /quarantined a file/)
    assert.equal((await service.stop()).code, 0)
    await verifyStore(dataDir, acked, { label: 'after the power loss', exact: true })
  })
})

describe('the checkpoint file at open', () => {
  it('replays the whole log when the checkpoint file is damaged, and ends exact', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'wal-damaged-'), 'data')
    const acked = new Acked()
    await writeCheckpointed(dataDir, acked)
    const log = readLog(dataDir)
    assert.equal(readCheckpointFile(dataDir), log.highest)
    // A file behind the checkpoint, back at its first version: only a whole replay restores it.
    const [userId] = [...acked.versions].find(([, version]) => version === 3) ?? []
    assert.ok(userId !== undefined)
    const first = log.events.find((event) => event.userId === userId && event.version === 1)
    writeFileSync(userPath(dataDir, userId), JSON.stringify(first?.user))
    writeFileSync(path.join(dataDir, 'checkpoint.json'), '{"through":"00000000')

    const logs = await verifyStore(dataDir, acked, { label: 'damaged checkpoint', exact: true })
    const replayed = logs.find((line) => line['msg'] === REPLAYED)
    assert.equal(replayed?.['checkpoint'], 'damaged')
    assert.equal(replayed?.['events'], log.events.length)
  })

  it('replays nothing in a data directory without a checkpoint file, and writes one', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'wal-older-'), 'data')
    const acked = new Acked()
    await writeCheckpointed(dataDir, acked)
    // As written before the log was the write-ahead log: every change was durable by itself.
    rmSync(path.join(dataDir, 'checkpoint.json'))
    const inodes = fileInodes(dataDir)

    const logs = await verifyStore(dataDir, acked, { label: 'no checkpoint', exact: true })
    assert.equal(
      logs.find((line) => line['msg'] === REPLAYED),
      undefined,
    )
    assert.deepEqual(fileInodes(dataDir), inodes, 'files were written again')
    assert.equal(readCheckpointFile(dataDir), readLog(dataDir).highest)
  })
})
