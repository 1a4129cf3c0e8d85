import assert from 'node:assert/strict'
import { constants, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { keyDigest } from '../../src/store/file/key-format.js'
import { type RunningChild, startChild } from '../helpers/child.js'
import { request, type TestResponse } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeUser, toContractJson } from '../helpers/store-users.js'
import {
  compileShim,
  readShimLog,
  type ShimCall,
  shimEnv,
  shimLogSize,
} from '../helpers/syscall-shim.js'
import { makeToken } from '../helpers/tokens.js'

/*
 * These tests run the service as a child with the syscall shim preloaded, which records every
 * open, write, fsync, fdatasync, rename, link, unlink and mkdir under the test's directory. After
 * each answer the test notes how long the log is: a call whose line lies within that length
 * happened before the answer arrived. An fsync is logged when it begins and when it ends, so "the
 * directory was fsynced after the rename" means an fsync of the directory that began after the
 * rename's line and ended, successfully, before the answer.
 *
 * A user's change follows CONTRACT §7 recipe (b): the change feed's log is the write-ahead log.
 * Its event is written to a segment of `DATA_DIR/events/` and fdatasynced (one sync for every
 * writer waiting); only then is the user's file renamed into place, unsynced, and the answer
 * sent. A checkpoint later fsyncs the files and their directories, then names in
 * `DATA_DIR/checkpoint.json` the last event whose change is durable by itself. Writes other than
 * a user's change (the lock, the first-start secret, a quarantine) still follow recipe (a).
 */

const token = makeToken()
const shim = compileShim()

interface Traced {
  readonly child: RunningChild
  readonly dataDir: string
  /** The log's length when the child was ready (loading done, listening). */
  readonly readyAt: number
  /** The child's recorded calls so far. */
  calls(): ShimCall[]
  /** The log's length now. */
  mark(): number
}

interface TracedOptions {
  root?: string
  /** DATA_DIR below root (default `data`). */
  dataDir?: string
  env?: Record<string, string | undefined>
  dirSyncDelayMs?: number
  dataSyncDelayMs?: number
}

async function startTraced(t: TestContext, options: TracedOptions = {}): Promise<Traced> {
  const root = options.root ?? (await makeTempDir(t, 'durability-'))
  const dataDir = path.join(root, options.dataDir ?? 'data')
  const log = path.join(root, 'shim.log')
  if (shim.library === undefined) throw new Error('no shim')
  const child = await startChild({
    dataDir,
    env: {
      ...shimEnv(shim.library, {
        log,
        logUnder: root,
        ...(options.dirSyncDelayMs === undefined ? {} : { dirSyncDelayMs: options.dirSyncDelayMs }),
        ...(options.dataSyncDelayMs === undefined
          ? {}
          : { dataSyncDelayMs: options.dataSyncDelayMs }),
      }),
      ...options.env,
    },
  })
  t.after(() => child.stop('SIGKILL'))
  const pid = child.proc.pid
  const readyAt = shimLogSize(log)
  return {
    child,
    dataDir,
    readyAt,
    calls: () => readShimLog(log).filter((call) => call.pid === pid),
    mark: () => shimLogSize(log),
  }
}

/** Sends a request and returns the answer with the log's length at the moment it arrived. */
async function traced(
  trace: Traced,
  send: () => Promise<TestResponse>,
): Promise<{ res: TestResponse; answeredAt: number }> {
  const res = await send()
  return { res, answeredAt: trace.mark() }
}

const isRename = (call: ShimCall): boolean => call.call.startsWith('rename')
const isLink = (call: ShimCall): boolean => call.call === 'link' || call.call === 'linkat'
const isUnlink = (call: ShimCall): boolean => call.call === 'unlink' || call.call === 'unlinkat'
const isMkdir = (call: ShimCall): boolean => call.call === 'mkdir' || call.call === 'mkdirat'
const isSyncEnd = (call: ShimCall): boolean => call.syncId !== undefined && call.begin !== true

/**
 * The successful fsync of `dir` that began after `after` and ended by `by` (a log length), or
 * undefined. Only such an fsync covers the directory change `after` made.
 */
function coveringDirSync(
  calls: readonly ShimCall[],
  dir: string,
  after: ShimCall,
  by: number,
): ShimCall | undefined {
  for (const begin of calls) {
    if (
      begin.begin !== true ||
      begin.dir !== true ||
      begin.paths[0] !== dir ||
      begin.seq <= after.seq
    )
      continue
    const end = calls.find((call) => isSyncEnd(call) && call.syncId === begin.syncId)
    if (end !== undefined && end.result === 0 && end.end <= by) return end
  }
  return undefined
}

/**
 * Asserts that `rename` put a temp file of `target`'s directory in place before the answer (`by`),
 * and that the temp file was created exclusively; returns the temp file's path.
 */
function assertExclusiveTemp(
  calls: readonly ShimCall[],
  rename: ShimCall,
  target: string,
  by: number,
  what: string,
): string {
  assert.ok(rename.end <= by, `${what}: the rename onto ${target} came after the answer`)
  const temp = rename.paths[0] ?? ''
  assert.equal(
    path.dirname(temp),
    path.dirname(target),
    `${what}: the temp file is not in the target's directory`,
  )
  const created = calls.find(
    (call) => call.flags !== undefined && call.paths[0] === temp && call.result >= 0,
  )
  assert.ok(created !== undefined, `${what}: the temp file ${temp} was never opened`)
  const exclusive = constants.O_CREAT | constants.O_EXCL
  assert.equal(
    (created.flags ?? 0) & exclusive,
    exclusive,
    `${what}: the temp file was not created exclusively`,
  )
  return temp
}

/**
 * Asserts the recipe of a durable replace of `target`, all done by `by`: a temp file in the same
 * directory, created exclusively, fsynced (ended) before its rename onto `target`, and the
 * directory fsynced after the rename. Returns the rename and the covering fsync.
 */
function assertDurableReplace(
  calls: readonly ShimCall[],
  target: string,
  by: number,
  what: string,
): { rename: ShimCall; dirSync: ShimCall } {
  const rename = calls
    .filter((call) => isRename(call) && call.result === 0 && call.paths[1] === target)
    .at(-1)
  assert.ok(rename !== undefined, `${what}: no rename onto ${target}`)
  const temp = assertExclusiveTemp(calls, rename, target, by, what)
  const fileSync = calls.find(
    (call) => isSyncEnd(call) && call.dir === false && call.paths[0] === temp && call.result === 0,
  )
  assert.ok(fileSync !== undefined, `${what}: the temp file ${temp} was never fsynced`)
  assert.ok(
    fileSync.seq < rename.seq,
    `${what}: the temp file was fsynced after its rename, not before`,
  )
  const dirSync = coveringDirSync(calls, path.dirname(target), rename, by)
  assert.ok(
    dirSync !== undefined,
    `${what}: no fsync of ${path.dirname(target)} after the rename and before the answer`,
  )
  return { rename, dirSync }
}

/** One event of the log (`DATA_DIR/events/*.ndjson`) and where its record lies in its segment. */
interface LogRecord {
  readonly segment: string
  readonly offset: number
  /** The record's length with its newline. */
  readonly bytes: number
  readonly id: string
  readonly type: string
  readonly userId: string
  readonly version: number
}

/** The log's events in id order; a run where every write succeeded voids none. */
function readLog(eventsDir: string): LogRecord[] {
  const records: LogRecord[] = []
  const names = readdirSync(eventsDir).filter((name) => name.endsWith('.ndjson'))
  for (const name of names) {
    const segment = path.join(eventsDir, name)
    const data = readFileSync(segment)
    for (let offset = 0; offset < data.length; ) {
      const stop = data.indexOf(0x0a, offset)
      assert.ok(stop >= 0, `${segment}: a record without its newline at ${offset}`)
      const fields = JSON.parse(data.subarray(offset, stop).toString('utf8')) as Record<
        string,
        unknown
      >
      assert.equal(
        fields['void'],
        undefined,
        `${segment}: an event was voided, yet no write failed`,
      )
      records.push({
        segment,
        offset,
        bytes: stop + 1 - offset,
        id: String(fields['id']),
        type: String(fields['type']),
        userId: String(fields['userId']),
        version: Number(fields['version']),
      })
      offset = stop + 1
    }
  }
  return records.sort((a, b) => (a.id < b.id ? -1 : 1))
}

/** The one event of `userId` of this type (and version, when given). */
function findEvent(
  log: readonly LogRecord[],
  userId: string,
  type: string,
  version?: number,
): LogRecord {
  const found = log.filter(
    (record) =>
      record.userId === userId &&
      record.type === type &&
      (version === undefined || record.version === version),
  )
  assert.equal(found.length, 1, `${found.length} ${type} events of ${userId} v${version ?? '*'}`)
  const [record] = found
  assert.ok(record !== undefined)
  return record
}

/**
 * The last of the writes that put `record` into its segment. The log only appends (and each
 * segment is new in these tests), so a write lands where the bytes written to that file before it
 * end.
 */
function recordWrite(calls: readonly ShimCall[], record: LogRecord, what: string): ShimCall {
  const end = record.offset + record.bytes
  let at = 0
  let covered = 0
  let last: ShimCall | undefined
  for (const call of calls) {
    if (call.data === undefined || call.paths[0] !== record.segment || call.result <= 0) continue
    const from = at
    at += call.result
    if (at <= record.offset || from >= end) continue
    covered += Math.min(at, end) - Math.max(from, record.offset)
    last = call
  }
  assert.ok(
    last !== undefined && covered === record.bytes,
    `${what}: the write of event ${record.id} into ${record.segment} is not in the trace`,
  )
  return last
}

/**
 * The successful fsync or fdatasync of `file` that began after the call `after` and ended before
 * the line `before` (a seq), or undefined.
 */
function syncBetween(
  calls: readonly ShimCall[],
  file: string,
  after: ShimCall,
  before: number,
): ShimCall | undefined {
  for (const begin of calls) {
    if (begin.begin !== true || begin.paths[0] !== file || begin.seq <= after.seq) continue
    if (begin.seq >= before) return undefined
    const end = calls.find((call) => isSyncEnd(call) && call.syncId === begin.syncId)
    if (end !== undefined && end.result === 0 && end.seq < before) return end
  }
  return undefined
}

/**
 * Checkpoints renamed into place in `dataDir`: the id each names, its rename, and the data
 * directory's fsync after it (asserting each was fsynced before its rename).
 */
function checkpointsIn(calls: readonly ShimCall[], dataDir: string) {
  const checkpointFile = path.join(dataDir, 'checkpoint.json')
  return calls
    .filter((call) => isRename(call) && call.result === 0 && call.paths[1] === checkpointFile)
    .map((rename) => {
      const temp = rename.paths[0] ?? ''
      const written = calls.find((call) => call.data !== undefined && call.paths[0] === temp)
      const through = /^\{"through":"([0-9a-f]{16})"\}\n$/.exec(written?.data ?? '')?.[1]
      assert.ok(through !== undefined, `the checkpoint written was ${written?.data}`)
      const fileSync = syncBetween(calls, temp, written ?? rename, rename.seq)
      assert.ok(fileSync !== undefined, 'the checkpoint was not fsynced before its rename')
      const rootSync = syncBetween(calls, dataDir, rename, Number.POSITIVE_INFINITY)
      return { through, rename, rootSync }
    })
}

/** The calls once a checkpoint names `highest` and the data directory was fsynced after it. */
function checkpointedThrough(trace: Traced, highest: string | undefined): Promise<ShimCall[]> {
  return waitFor(
    'a checkpoint through the last event',
    () => {
      const now = trace.calls()
      const last = checkpointsIn(now, trace.dataDir).at(-1)
      return last?.through === highest && last?.rootSync !== undefined ? now : undefined
    },
    10_000,
  )
}

/**
 * Asserts that a change's event was durable before `shown` (the rename or unlink that shows the
 * change on disk): a sync of its segment began after its record was written and ended before,
 * and the events directory was fsynced after the segment was made (a new segment's name must
 * survive a crash too). Returns the end of the segment's sync.
 */
function assertLoggedBefore(
  calls: readonly ShimCall[],
  record: LogRecord,
  shown: ShimCall,
  what: string,
): ShimCall {
  const write = recordWrite(calls, record, what)
  const sync = syncBetween(calls, record.segment, write, shown.seq)
  assert.ok(
    sync !== undefined,
    `${what}: no sync of ${record.segment} began after event ${record.id} was written and ended before the ${shown.call} of ${shown.paths.at(-1)}`,
  )
  const made = calls.find(
    (call) => call.flags !== undefined && call.paths[0] === record.segment && call.result >= 0,
  )
  assert.ok(made !== undefined, `${what}: ${record.segment} was never opened`)
  assert.ok(
    syncBetween(calls, path.dirname(record.segment), made, shown.seq) !== undefined,
    `${what}: the events directory was not fsynced after ${record.segment} was made and before the ${shown.call}`,
  )
  return sync
}

/**
 * Asserts how a file was put in place for a change answered at `by` (a log length), recipe (b):
 * a temp file in the same directory, created exclusively and written, renamed over `target` after
 * `from` (a log length) and before the answer, and never fsynced (the log makes the change
 * durable; a checkpoint syncs the file later). Returns the rename and the temp file's last write.
 */
function assertUnsyncedReplace(
  calls: readonly ShimCall[],
  target: string,
  from: number,
  by: number,
  what: string,
): { rename: ShimCall; written: ShimCall } {
  const rename = calls
    .filter(
      (call) => isRename(call) && call.result === 0 && call.paths[1] === target && call.end > from,
    )
    .at(-1)
  assert.ok(rename !== undefined, `${what}: no rename onto ${target}`)
  const temp = assertExclusiveTemp(calls, rename, target, by, what)
  const written = calls
    .filter((call) => call.data !== undefined && call.paths[0] === temp && call.result > 0)
    .at(-1)
  assert.ok(
    written !== undefined && written.seq < rename.seq,
    `${what}: the temp file was not written before its rename`,
  )
  assert.equal(
    calls.find((call) => call.syncId !== undefined && call.paths[0] === temp),
    undefined,
    `${what}: the temp file was fsynced: recipe (a)'s cost, which the log makes needless`,
  )
  return { rename, written }
}

/** The unlink of `file` after `from` (a log length) and before the answer at `by`. */
function assertUnlinked(
  calls: readonly ShimCall[],
  file: string,
  from: number,
  by: number,
  what: string,
): ShimCall {
  const unlink = calls.find(
    (call) => isUnlink(call) && call.result === 0 && call.paths[0] === file && call.end > from,
  )
  assert.ok(unlink !== undefined, `${what}: ${file} was not unlinked`)
  assert.ok(unlink.end <= by, `${what}: the unlink came after the answer`)
  return unlink
}

/** Asserts that every directory made under `under` had its parent fsynced afterwards, by `by`. */
function assertDurableMkdirs(
  calls: readonly ShimCall[],
  under: string,
  by: number,
  what: string,
): string[] {
  const made = calls.filter(
    (call) => isMkdir(call) && call.result === 0 && (call.paths[0] ?? '').startsWith(`${under}/`),
  )
  for (const mkdir of made) {
    const dir = mkdir.paths[0] ?? ''
    assert.ok(
      coveringDirSync(calls, path.dirname(dir), mkdir, by) !== undefined,
      `${what}: ${dir} was made but its parent was not fsynced after`,
    )
  }
  return made.map((call) => call.paths[0] ?? '')
}

describe('durable writes, seen in the system calls', () => {
  it("makes each create, replace, action and delete durable by its event's log sync before its file is renamed or unlinked, unsynced, and before the answer (recipe b)", {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const trace = await startTraced(t)
    const { child, dataDir } = trace
    const usersDir = path.join(dataDir, 'users')
    const eventsDir = path.join(dataDir, 'events')

    /** Sends a change to user `id` (or a create) and checks recipe (b) on its file. */
    const change = async (
      what: string,
      send: () => Promise<TestResponse>,
      status: number,
      type: string,
    ): Promise<User> => {
      const from = trace.mark()
      const { res, answeredAt } = await traced(trace, send)
      assert.equal(res.status, status, res.text)
      const user = res.json<User>()
      const calls = trace.calls()
      const target = path.join(usersDir, `${user.id}.json`)
      const { rename } = assertUnsyncedReplace(calls, target, from, answeredAt, what)
      const record = findEvent(readLog(eventsDir), user.id, type, user.version)
      assertLoggedBefore(calls, record, rename, what)
      return user
    }

    const email = uniqueEmail('durable')
    const user = await change(
      'POST',
      () => request('POST', `${child.url}/users`, { token, json: { email, name: 'Durable' } }),
      201,
      'user.created',
    )
    const url = `${child.url}/users/${user.id}`
    const patched = await change(
      'PATCH',
      () => request('PATCH', url, { token, json: { name: 'Patched' } }),
      200,
      'user.updated',
    )
    assert.equal(patched.version, 2)
    const replaced = await change(
      'PUT',
      () => request('PUT', url, { token, json: { email, name: 'Replaced', metadata: {} } }),
      200,
      'user.updated',
    )
    assert.equal(replaced.version, 3)
    const activated = await change(
      'POST :activate',
      () => request('POST', `${url}:activate`, { token }),
      200,
      'user.activated',
    )
    assert.equal(activated.version, 4)

    // A delete: the tombstone is renamed into place once the event is durable, then the user
    // file goes, both before the answer and neither synced.
    const from = trace.mark()
    const remove = await traced(trace, () => request('DELETE', url, { token }))
    assert.equal(remove.res.status, 204, remove.res.text)
    const calls = trace.calls()
    const grave = path.join(dataDir, 'tombstones', `${user.id}.json`)
    const buried = assertUnsyncedReplace(calls, grave, from, remove.answeredAt, 'DELETE')
    const record = findEvent(readLog(eventsDir), user.id, 'user.deleted')
    assertLoggedBefore(calls, record, buried.rename, 'DELETE (tombstone)')
    const unlink = assertUnlinked(
      calls,
      path.join(usersDir, `${user.id}.json`),
      from,
      remove.answeredAt,
      'DELETE',
    )
    assert.ok(buried.rename.seq < unlink.seq, 'the user file went before its tombstone came')
  })

  it("writes a change's temp file before its event goes to the log (a full disk refuses the change first), and renames it only once the log's sync ended", {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    // A slow log: its fdatasync takes 300 ms, so a rename that does not wait for it comes first.
    const trace = await startTraced(t, { dataSyncDelayMs: 300 })
    const { child, dataDir } = trace
    const eventsDir = path.join(dataDir, 'events')

    /** Checks the order of one change: temp written, event logged and synced, then the rename. */
    const check = (
      what: string,
      target: string,
      from: number,
      answeredAt: number,
      userId: string,
      type: string,
    ): void => {
      const calls = trace.calls()
      const { rename, written } = assertUnsyncedReplace(calls, target, from, answeredAt, what)
      const record = findEvent(readLog(eventsDir), userId, type)
      assertLoggedBefore(calls, record, rename, what)
      assert.ok(
        written.seq < recordWrite(calls, record, what).seq,
        `${what}: the event was written to the log before the temp file was written`,
      )
    }

    let from = trace.mark()
    const create = await traced(trace, () =>
      request('POST', `${child.url}/users`, {
        token,
        json: { email: uniqueEmail('feed'), name: 'Feed' },
      }),
    )
    assert.equal(create.res.status, 201, create.res.text)
    const id = create.res.json<User>().id
    const target = path.join(dataDir, 'users', `${id}.json`)
    check('POST', target, from, create.answeredAt, id, 'user.created')

    from = trace.mark()
    const patch = await traced(trace, () =>
      request('PATCH', `${child.url}/users/${id}`, { token, json: { name: 'Fed' } }),
    )
    assert.equal(patch.res.status, 200, patch.res.text)
    check('PATCH', target, from, patch.answeredAt, id, 'user.updated')

    from = trace.mark()
    const remove = await traced(trace, () =>
      request('DELETE', `${child.url}/users/${id}`, { token }),
    )
    assert.equal(remove.res.status, 204, remove.res.text)
    const grave = path.join(dataDir, 'tombstones', `${id}.json`)
    check('DELETE', grave, from, remove.answeredAt, id, 'user.deleted')
  })

  it("shares the log's fdatasyncs among concurrent writers, each covered before its rename and answer (group commit)", {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    // A slow log sync: writers keep appending while one runs, and must wait for the next.
    const trace = await startTraced(t, { dataSyncDelayMs: 30 })
    const usersDir = path.join(trace.dataDir, 'users')
    const eventsDir = path.join(trace.dataDir, 'events')
    const startedAt = trace.mark()
    const writers = 30
    const answers = await Promise.all(
      Array.from({ length: writers }, () =>
        traced(trace, () =>
          request('POST', `${trace.child.url}/users`, {
            token,
            json: { email: uniqueEmail('group'), name: 'Group' },
          }),
        ),
      ),
    )
    const calls = trace.calls()
    const log = readLog(eventsDir)
    for (const { res, answeredAt } of answers) {
      assert.equal(res.status, 201, res.text)
      const id = res.json<User>().id
      const target = path.join(usersDir, `${id}.json`)
      const { rename } = assertUnsyncedReplace(
        calls,
        target,
        startedAt,
        answeredAt,
        'a concurrent POST',
      )
      assertLoggedBefore(calls, findEvent(log, id, 'user.created'), rename, 'a concurrent POST')
    }
    const logSyncs = calls.filter(
      (call) =>
        isSyncEnd(call) &&
        call.dir === false &&
        path.dirname(call.paths[0] ?? '') === eventsDir &&
        call.end > startedAt,
    )
    t.diagnostic(`${writers} concurrent creates cost ${logSyncs.length} syncs of the log`)
    assert.ok(
      logSyncs.length <= writers / 3,
      `${writers} concurrent writers cost ${logSyncs.length} syncs of the log, not far fewer than ${writers}`,
    )
  })

  it("checkpoints: before checkpoint.json names a change's event, the file it renamed is fsynced and its directory fsynced after the rename or unlink; the data directory after checkpoint.json", {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    // Checkpoints every 5 ms, so that several run while the writers below keep changing files.
    const trace = await startTraced(t, { env: { CHECKPOINT_MS: '5' } })
    const { child, dataDir } = trace
    const usersDir = path.join(dataDir, 'users')
    const gravesDir = path.join(dataDir, 'tombstones')
    const eventsDir = path.join(dataDir, 'events')

    // Each writer creates a user and changes it a few times; half of them delete it at the end.
    const writers = 12
    await Promise.all(
      Array.from({ length: writers }, async (_, writer) => {
        const res = await request('POST', `${child.url}/users`, {
          token,
          json: { email: uniqueEmail('checkpoint'), name: 'Checkpoint' },
        })
        assert.equal(res.status, 201, res.text)
        const url = `${child.url}/users/${res.json<User>().id}`
        for (let round = 1; round <= 3; round += 1) {
          const patch = await request('PATCH', url, { token, json: { name: `Round ${round}` } })
          assert.equal(patch.status, 200, patch.text)
        }
        if (writer % 2 === 0) {
          const remove = await request('DELETE', url, { token })
          assert.equal(remove.status, 204, remove.text)
        }
      }),
    )
    const log = readLog(eventsDir)
    const highest = log.at(-1)?.id
    assert.equal(log.length, writers * 4 + writers / 2)

    // Wait for the checkpoint that names the last event, and for the data directory's fsync after.
    const calls = await checkpointedThrough(trace, highest)
    const all = checkpointsIn(calls, dataDir)
    t.diagnostic(`${all.length} checkpoints for ${log.length} events`)
    assert.ok(
      all.filter((checkpoint) => checkpoint.through !== '0000000000000000').length >= 2,
      'the test needs several checkpoints while writes go on',
    )

    for (const { through, rename: named, rootSync } of all) {
      const what = `the checkpoint through ${through}`
      assert.ok(rootSync !== undefined, `${what}: the data directory was not fsynced after it`)
      /** A file's change, and the fsyncs of the file and of its directory after it, before `named`. */
      const assertSynced = (change: ShimCall, file: string | undefined, dir: string): void => {
        assert.ok(change.seq < named.seq, `${what}: named an event whose file had not changed yet`)
        if (file !== undefined)
          assert.ok(
            syncBetween(calls, file, change, named.seq) !== undefined,
            `${what}: ${file} was not fsynced after its ${change.call}`,
          )
        assert.ok(
          syncBetween(calls, dir, change, named.seq) !== undefined,
          `${what}: ${dir} was not fsynced after the ${change.call} of ${change.paths.at(-1)}`,
        )
      }
      // Per user, the last change it names must be durable (a later one may be, the replay does
      // the rest); the n-th change of a user's file is its n-th rename, one writer at a time.
      const claimed = log.filter((record) => record.id <= through)
      const users = new Set(claimed.map((record) => record.userId))
      for (const userId of users) {
        const events = claimed.filter((record) => record.userId === userId)
        const last = events.at(-1)
        assert.ok(last !== undefined)
        const userFile = path.join(usersDir, `${userId}.json`)
        if (last.type === 'user.deleted') {
          const grave = path.join(gravesDir, `${userId}.json`)
          const buried = calls.find(
            (call) => isRename(call) && call.result === 0 && call.paths[1] === grave,
          )
          const unlink = calls.find(
            (call) => isUnlink(call) && call.result === 0 && call.paths[0] === userFile,
          )
          assert.ok(buried !== undefined && unlink !== undefined, `${what}: ${userId} not deleted`)
          assertSynced(buried, grave, gravesDir)
          assertSynced(unlink, undefined, usersDir)
        } else {
          const renames = calls.filter(
            (call) => isRename(call) && call.result === 0 && call.paths[1] === userFile,
          )
          const rename = renames[events.length - 1]
          assert.ok(
            rename !== undefined,
            `${what}: ${userFile} was renamed ${renames.length} times`,
          )
          // Changed again before the checkpoint: that change's event, durable before it and past
          // the checkpoint, is replayed after a crash, whatever inode the fsync by name met.
          const changedAgain = calls.some(
            (call) =>
              call.seq > rename.seq &&
              call.seq < named.seq &&
              call.result === 0 &&
              ((isRename(call) && call.paths[1] === userFile) ||
                (isUnlink(call) && call.paths[0] === userFile)),
          )
          assertSynced(rename, changedAgain ? undefined : userFile, usersDir)
        }
      }
    }
  })

  it("checkpoints keyed changes: before checkpoint.json names the event of a change made with an Idempotency-Key, the key's line is in its journal, the journal fsynced after that line's write, and keys/ fsynced after the journal was made", {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const trace = await startTraced(t, { env: { CHECKPOINT_MS: '5' } })
    const { child, dataDir } = trace
    const keysDir = path.join(dataDir, 'keys')
    /** The key each user was created with. */
    const keyOf = new Map<string, string>()
    await Promise.all(
      Array.from({ length: 24 }, async (_, n) => {
        const key = `durable-${n}`
        const res = await request('POST', `${child.url}/users`, {
          token,
          json: { email: uniqueEmail('keyed'), name: 'Keyed' },
          headers: { 'idempotency-key': `"${key}"` },
        })
        assert.equal(res.status, 201, res.text)
        keyOf.set(res.json<User>().id, key)
      }),
    )
    // The log holds each key's line beside its event's.
    const log = readLog(path.join(dataDir, 'events')).filter((logged) =>
      logged.type.startsWith('user.'),
    )
    assert.equal(log.length, 24)
    const calls = await checkpointedThrough(trace, log.at(-1)?.id)
    const journals = readdirSync(keysDir).filter((name) => name.endsWith('.keys'))
    assert.equal(journals.length, 1, `one journal for keys of one hour: ${journals.join(', ')}`)
    const journal = path.join(keysDir, journals[0] ?? '')
    const text = readFileSync(journal, 'utf8')
    const writes = calls.filter(
      (call) => call.data !== undefined && call.paths[0] === journal && call.result > 0,
    )
    const made = calls.find(
      (call) => call.call.startsWith('open') && call.paths[0] === journal && call.result >= 0,
    )
    assert.ok(made !== undefined && writes.length > 0, 'the journal was written')
    for (const { through, rename: named } of checkpointsIn(calls, dataDir)) {
      for (const record of log.filter((logged) => logged.id <= through)) {
        const key = keyOf.get(record.userId)
        assert.ok(key !== undefined, `an event of an unknown user: ${record.userId}`)
        const what = `the checkpoint through ${through}, the key ${key}`
        const digest = keyDigest('tester', key)
        const line = text.indexOf(`${digest} `)
        assert.ok(line === 0 || (line > 0 && text[line - 1] === '\n'), `${what}: no line`)
        // Appends only: the line is written by the write that takes the journal past its start.
        let size = 0
        const write = writes.find((call) => {
          size += call.result
          return size > line
        })
        assert.ok(write !== undefined && write.seq < named.seq, `${what}: its line was not written`)
        assert.ok(
          syncBetween(calls, journal, write, named.seq) !== undefined,
          `${what}: its journal was not fsynced after its line's write`,
        )
        assert.ok(
          syncBetween(calls, keysDir, made, named.seq) !== undefined,
          `${what}: keys/ was not fsynced after the journal was made`,
        )
      }
    }
  })

  it('moves a bad file to quarantine at start durably: the move, both directories, and the new quarantine directory', {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const root = await makeTempDir(t, 'durability-')
    const usersDir = path.join(root, 'data', 'users')
    mkdirSync(usersDir, { recursive: true })
    const torn = makeUser()
    writeFileSync(path.join(usersDir, `${torn.id}.json`), toContractJson(torn).slice(0, 30))
    const trace = await startTraced(t, { root })
    const calls = trace.calls()
    const quarantineDir = path.join(trace.dataDir, 'quarantine')
    const from = path.join(usersDir, `${torn.id}.json`)
    const move = calls.find((call) => isRename(call) && call.result === 0 && call.paths[0] === from)
    assert.ok(move !== undefined, 'the torn file was not renamed into quarantine')
    assert.equal(move.paths[1], path.join(quarantineDir, `${torn.id}.json`))
    assert.ok(
      move.end <= trace.readyAt,
      'the quarantine happened after the service said it was ready',
    )
    assert.ok(
      coveringDirSync(calls, usersDir, move, trace.readyAt) !== undefined,
      'users/ was not fsynced after the move, before ready',
    )
    assert.ok(
      coveringDirSync(calls, quarantineDir, move, trace.readyAt) !== undefined,
      'quarantine/ was not fsynced after the move, before ready',
    )
    const made = assertDurableMkdirs(calls, trace.dataDir, trace.readyAt, 'start-up')
    assert.ok(made.includes(quarantineDir), `quarantine/ was not made here: ${made.join(', ')}`)
  })

  it('writes the first-start secret durably, only after taking the lock, and makes every new directory durable', {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const root = await makeTempDir(t, 'durability-')
    // Two missing levels above DATA_DIR: each new directory's parent must be fsynced, up to root.
    const trace = await startTraced(t, {
      root,
      dataDir: 'new/deeper/data',
      env: { JWT_SECRET: undefined },
    })
    const calls = trace.calls()
    const secret = path.join(trace.dataDir, '.jwt-secret')
    const { rename } = assertDurableReplace(calls, secret, trace.readyAt, 'the first-start secret')
    const lock = calls.find(
      (call) => isLink(call) && call.result === 0 && /\/\.lock\.\d+$/.test(call.paths[1] ?? ''),
    )
    assert.ok(lock !== undefined, 'no lock file was linked into place')
    const secretOpened = calls.find(
      (call) => call.flags !== undefined && call.paths[0] === rename.paths[0],
    )
    assert.ok(
      secretOpened !== undefined && lock.seq < secretOpened.seq,
      'the secret was written before the lock was taken',
    )
    const made = assertDurableMkdirs(calls, root, trace.readyAt, 'first start')
    for (const dir of [
      path.join(root, 'new'),
      path.join(root, 'new', 'deeper'),
      trace.dataDir,
      path.join(trace.dataDir, 'users'),
    ]) {
      assert.ok(made.includes(dir), `${dir} was not made on the first start: ${made.join(', ')}`)
    }
  })

  it('fsyncs the lock file before linking it into place', { timeout: 60_000 }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const trace = await startTraced(t)
    const calls = trace.calls()
    const link = calls.find(
      (call) => isLink(call) && call.result === 0 && /\/\.lock\.\d+$/.test(call.paths[1] ?? ''),
    )
    assert.ok(link !== undefined, 'no lock file was linked into place')
    assert.ok(link.end <= trace.readyAt)
    const temp = link.paths[0] ?? ''
    assert.equal(path.dirname(temp), trace.dataDir)
    const fileSync = calls.find(
      (call) =>
        isSyncEnd(call) && call.dir === false && call.paths[0] === temp && call.result === 0,
    )
    assert.ok(
      fileSync !== undefined && fileSync.seq < link.seq,
      "the lock's temp file was not fsynced before the link",
    )
  })

  it('fsyncs the data directory after linking the lock file, also on a start that changes nothing else', {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const root = await makeTempDir(t, 'durability-')
    const first = await startTraced(t, { root })
    const exit = await first.child.stop('SIGTERM')
    assert.equal(exit.code, 0)
    const trace = await startTraced(t, { root })
    const calls = trace.calls()
    const link = calls.find(
      (call) => isLink(call) && call.result === 0 && /\/\.lock\.\d+$/.test(call.paths[1] ?? ''),
    )
    assert.ok(link !== undefined, 'no lock file was linked into place')
    assert.ok(
      coveringDirSync(calls, trace.dataDir, link, trace.readyAt) !== undefined,
      'the data directory was not fsynced after the lock file was linked',
    )
  })
})
