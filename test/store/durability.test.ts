import assert from 'node:assert/strict'
import { constants, mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { type RunningChild, startChild } from '../helpers/child.js'
import { request, type TestResponse } from '../helpers/http.js'
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
 * open, fsync, rename, link, unlink and mkdir under the test's directory. After each answer the
 * test notes how long the log is: a call whose line lies within that length happened before the
 * answer arrived. An fsync is logged when it begins and when it ends, so "the directory was
 * fsynced after the rename" means an fsync of the directory that began after the rename's line
 * and ended, successfully, before the answer.
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

/** Asserts that `file` was unlinked and its directory fsynced after that, all by `by`. */
function assertDurableUnlink(
  calls: readonly ShimCall[],
  file: string,
  by: number,
  what: string,
): ShimCall {
  const unlink = calls
    .filter((call) => isUnlink(call) && call.result === 0 && call.paths[0] === file)
    .at(-1)
  assert.ok(unlink !== undefined, `${what}: ${file} was not unlinked`)
  assert.ok(unlink.end <= by, `${what}: the unlink came after the answer`)
  assert.ok(
    coveringDirSync(calls, path.dirname(file), unlink, by) !== undefined,
    `${what}: no fsync of ${path.dirname(file)} after the unlink and before the answer`,
  )
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
  it("fsyncs a created, replaced or deleted user's file before its rename and the directory after it, before answering", {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const trace = await startTraced(t)
    const { child, dataDir } = trace
    const usersDir = path.join(dataDir, 'users')

    const email = uniqueEmail('durable')
    const create = await traced(trace, () =>
      request('POST', `${child.url}/users`, { token, json: { email, name: 'Durable' } }),
    )
    assert.equal(create.res.status, 201, create.res.text)
    const user = create.res.json<User>()
    const target = path.join(usersDir, `${user.id}.json`)
    const created = assertDurableReplace(trace.calls(), target, create.answeredAt, 'POST')

    const patch = await traced(trace, () =>
      request('PATCH', `${child.url}/users/${user.id}`, { token, json: { name: 'Patched' } }),
    )
    assert.equal(patch.res.status, 200, patch.res.text)
    const patched = assertDurableReplace(trace.calls(), target, patch.answeredAt, 'PATCH')
    assert.ok(patched.rename.seq > created.dirSync.seq, 'PATCH made its own rename')

    const put = await traced(trace, () =>
      request('PUT', `${child.url}/users/${user.id}`, {
        token,
        json: { email, name: 'Replaced', metadata: {} },
      }),
    )
    assert.equal(put.res.status, 200, put.res.text)
    const replaced = assertDurableReplace(trace.calls(), target, put.answeredAt, 'PUT')
    assert.ok(replaced.rename.seq > patched.dirSync.seq, 'PUT made its own rename')

    const action = await traced(trace, () =>
      request('POST', `${child.url}/users/${user.id}:activate`, { token }),
    )
    assert.equal(action.res.status, 200, action.res.text)
    assertDurableReplace(trace.calls(), target, action.answeredAt, 'POST :activate')

    // A delete: the tombstone is made durable first, then the user file goes, durably too.
    const remove = await traced(trace, () =>
      request('DELETE', `${child.url}/users/${user.id}`, { token }),
    )
    assert.equal(remove.res.status, 204, remove.res.text)
    const calls = trace.calls()
    const grave = path.join(dataDir, 'tombstones', `${user.id}.json`)
    const buried = assertDurableReplace(calls, grave, remove.answeredAt, 'DELETE (tombstone)')
    const unlink = assertDurableUnlink(calls, target, remove.answeredAt, 'DELETE (user file)')
    assert.ok(
      buried.dirSync.seq < unlink.seq,
      'the tombstone was durable before the user file was unlinked',
    )
  })

  it("makes each change's event durable before the change shows on disk, while the temp file is written meanwhile", {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    // A slow feed: its fdatasync takes 300 ms, so a rename that does not wait for it comes first.
    const trace = await startTraced(t, { dataSyncDelayMs: 300 })
    const { child, dataDir } = trace
    const eventsDir = path.join(dataDir, 'events')
    const usersDir = path.join(dataDir, 'users')
    /** The feed's successful fdatasync that began after `from` (a log length) and ended before `change`. */
    const feedSyncBefore = (
      calls: readonly ShimCall[],
      from: number,
      change: ShimCall,
    ): ShimCall | undefined => {
      const begins = calls.filter(
        (call) =>
          call.begin === true &&
          call.call === 'fdatasync' &&
          call.end > from &&
          path.dirname(call.paths[0] ?? '') === eventsDir,
      )
      return begins
        .map((begin) => calls.find((call) => isSyncEnd(call) && call.syncId === begin.syncId))
        .find((end) => end !== undefined && end.result === 0 && end.seq < change.seq)
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
    const target = path.join(usersDir, `${id}.json`)
    let calls = trace.calls()
    const created = assertDurableReplace(calls, target, create.answeredAt, 'POST')
    assert.ok(
      feedSyncBefore(calls, from, created.rename) !== undefined,
      'POST: the user file was renamed before its event was durable',
    )
    // The overlap: the temp file was written and fsynced while the feed's sync ran.
    const tempSync = calls.find(
      (call) => isSyncEnd(call) && call.dir === false && call.paths[0] === created.rename.paths[0],
    )
    const feedBegin = calls.find(
      (call) =>
        call.begin === true &&
        call.call === 'fdatasync' &&
        call.end > from &&
        path.dirname(call.paths[0] ?? '') === eventsDir,
    )
    assert.ok(
      tempSync !== undefined && feedBegin !== undefined,
      'POST: no temp file fsync or no feed sync',
    )
    const feedEnd = calls.find((call) => isSyncEnd(call) && call.syncId === feedBegin.syncId)
    assert.ok(
      feedEnd !== undefined && tempSync.seq < feedEnd.seq,
      'POST: the temp file waited for the feed instead of being written meanwhile',
    )

    from = trace.mark()
    const patch = await traced(trace, () =>
      request('PATCH', `${child.url}/users/${id}`, { token, json: { name: 'Fed' } }),
    )
    assert.equal(patch.res.status, 200, patch.res.text)
    calls = trace.calls()
    const patched = assertDurableReplace(calls, target, patch.answeredAt, 'PATCH')
    assert.ok(
      feedSyncBefore(calls, from, patched.rename) !== undefined,
      'PATCH: the user file was renamed before its event was durable',
    )

    from = trace.mark()
    const remove = await traced(trace, () =>
      request('DELETE', `${child.url}/users/${id}`, { token }),
    )
    assert.equal(remove.res.status, 204, remove.res.text)
    calls = trace.calls()
    const buried = assertDurableReplace(
      calls,
      path.join(dataDir, 'tombstones', `${id}.json`),
      remove.answeredAt,
      'DELETE (tombstone)',
    )
    assert.ok(
      feedSyncBefore(calls, from, buried.rename) !== undefined,
      'DELETE: the tombstone was renamed before its event was durable',
    )
  })

  it('shares directory fsyncs among concurrent writers, each covered before its answer (group commit)', {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    // A slow directory fsync: writers keep renaming while one runs, and must wait for the next.
    const trace = await startTraced(t, { dirSyncDelayMs: 30 })
    const usersDir = path.join(trace.dataDir, 'users')
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
    for (const { res, answeredAt } of answers) {
      assert.equal(res.status, 201, res.text)
      assertDurableReplace(
        calls,
        path.join(usersDir, `${res.json<User>().id}.json`),
        answeredAt,
        'a concurrent POST',
      )
    }
    const dirSyncs = calls.filter(
      (call) =>
        isSyncEnd(call) && call.dir === true && call.paths[0] === usersDir && call.end > startedAt,
    )
    t.diagnostic(`${writers} concurrent creates cost ${dirSyncs.length} fsyncs of users/`)
    assert.ok(
      dirSyncs.length <= (writers * 2) / 3,
      `${writers} concurrent writers cost ${dirSyncs.length} fsyncs of users/, not clearly fewer than ${writers}`,
    )
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
