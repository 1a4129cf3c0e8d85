/**
 * Helpers for the write-ahead-log recovery tests (test/store/wal-recovery.test.ts): running the
 * WAL writer child, keeping what it acknowledged, and checking a reopened store against CONTRACT
 * §7 and §10.
 */
import assert from 'node:assert/strict'
import { type FSWatcher, watch } from 'node:fs'
import type { TestContext } from 'node:test'

import type { ChangeEvent } from '../../src/domain/event.js'
import { FileStore } from '../../src/store/file/file-store.js'
import { exited, spawnService } from './child.js'
import { helperScript } from './child-scripts.js'
import { createMemoryLogger } from './service.js'
import { CHECKPOINT_TEMP, checkFiles, lastEvents, readCheckpointFile, readLog } from './wal-disk.js'

const WRITER = helperScript('wal-writer')
const ACK = /^([0-9a-f-]{36}) (\d+)( deleted)?$/

/** What the writers were told was done, over every round on one data directory. */
export class Acked {
  /** The last acknowledged version of each user not deleted. */
  readonly versions = new Map<string, number>()
  readonly deleted = new Set<string>()
  /** Every acknowledged change as `<id> <version>` (a deletion with its event's version). */
  readonly changes = new Set<string>()

  add(id: string, version: number, deleted = false): void {
    this.changes.add(`${id} ${version}`)
    if (deleted) {
      this.versions.delete(id)
      this.deleted.add(id)
    } else {
      this.versions.set(id, Math.max(version, this.versions.get(id) ?? 0))
    }
  }

  /** Adds the writer's acknowledgements (a line cut by the kill is left out). */
  addOutput(stdout: string): number {
    const lines = stdout.split('\n').slice(0, -1)
    let count = 0
    for (const line of lines) {
      if (line === 'ready' || line === 'done') continue
      const match = ACK.exec(line)
      if (match === null) throw new Error(`an unexpected line from the WAL writer: ${line}`)
      this.add(match[1] ?? '', Number(match[2]), match[3] !== undefined)
      count += 1
    }
    return count
  }
}

export interface WriterRun {
  readonly seed: number
  readonly checkpointMs: number
  /** Stop after this many changes, then idle until killed (an exact state)... */
  readonly limit?: number
  /** ...or SIGKILL once this many changes were acknowledged, while the writers run. */
  readonly killAfter?: number
  /** The share of changes that create a user (default 0.3). */
  readonly creates?: number
  /** After `killAfter`, SIGKILL when the next checkpoint starts writing its file. */
  readonly atCheckpointWrite?: boolean
}

/** Runs the WAL writer on `dataDir`, SIGKILLs it as `run` says, and adds what it acknowledged. */
export async function runWriter(
  t: TestContext,
  dataDir: string,
  acked: Acked,
  run: WriterRun,
): Promise<number> {
  const child = spawnService({
    dataDir,
    env: { CHECKPOINT_MS: String(run.checkpointMs) },
    args: [WRITER, dataDir, String(run.seed), String(run.limit ?? 0), String(run.creates ?? 0.3)],
  })
  t.after(() => {
    child.proc.kill('SIGKILL')
  })
  const deadline = Date.now() + 30_000
  const enough = (): boolean => {
    const out = child.stdout()
    if (run.limit !== undefined) return out.endsWith('done\n')
    return out.startsWith('ready\n') && out.split('\n').length - 2 >= (run.killAfter ?? 1)
  }
  let watcher: FSWatcher | undefined
  await new Promise<void>((resolve, reject) => {
    const stdout = child.proc.stdout
    if (stdout === null) throw new Error('the WAL writer has no stdout')
    const finish = (error?: Error): void => {
      clearInterval(timer)
      stdout.off('data', check)
      watcher?.close()
      if (error === undefined) resolve()
      else reject(error)
    }
    const kill = (): void => {
      child.proc.kill('SIGKILL')
      finish()
    }
    // spawnService's own listener was added first, so child.stdout() already holds the chunk.
    const check = (): void => {
      if (exited(child) || Date.now() > deadline) {
        finish(new Error(`the WAL writer stopped or stalled:\n${child.stderr()}`))
      } else if (enough() && run.atCheckpointWrite !== true) {
        kill()
      } else if (enough() && watcher === undefined) {
        // The checkpoint's own file write: its temp file is there until the rename.
        watcher = watch(dataDir, (_type, name) => {
          if (name !== null && CHECKPOINT_TEMP.test(name)) kill()
        })
      }
    }
    const timer = setInterval(check, 50)
    stdout.on('data', check)
  })
  const exit = await child.exited
  assert.equal(exit.signal, 'SIGKILL', `the writer stopped by itself:\n${child.stderr()}`)
  return acked.addOutput(child.stdout())
}

/** What the file store logs when it cuts a torn last line from the event log at open. */
export const TORN_LINE_CUT = 'cut a torn last line from the event log'

/**
 * The cut of a torn last line that the kill itself made: once a fatal signal is pending, Linux
 * ends a write to a file at a page boundary (generic_perform_write), so lines written at once may
 * stop mid-line, the file's size then a multiple of the page (4 KiB, or a multiple of it). It was
 * never acknowledged, and cutting it is right. A tear anywhere else would be a line written in
 * pieces, which the store never does.
 */
export function isTornByKill(line: Record<string, unknown>): boolean {
  const { msg, offset, bytes } = line
  if (msg !== TORN_LINE_CUT) return false
  return typeof offset === 'number' && typeof bytes === 'number' && (offset + bytes) % 4096 === 0
}

export interface VerifyOptions {
  readonly label: string
  /** The writers were idle when killed: every user is exactly at its last acknowledged version. */
  readonly exact: boolean
  /** Warning messages expected at open (any other warning fails). */
  readonly warnings?: readonly string[]
}

/**
 * Opens a FileStore on `dataDir` as a restart would and checks §7 and §10 once it is open: every
 * acknowledged change is there, every file whole and nothing quarantined, the checkpoint past the
 * whole log, and exactly one event per change with each user's versions in order and its last
 * event what the store holds. Returns the log lines of the open.
 */
export async function verifyStore(
  dataDir: string,
  acked: Acked,
  options: VerifyOptions,
): Promise<Record<string, unknown>[]> {
  const { label } = options
  const logs: Record<string, unknown>[] = []
  const store = new FileStore({
    dataDir,
    logger: createMemoryLogger(logs),
    checkpointMs: 3_600_000,
  })
  await store.open()
  try {
    assert.equal(store.health().state, 'ok', `${label}: the store is not healthy`)
    checkFiles(dataDir, label)
    const log = readLog(dataDir)
    assert.equal(
      readCheckpointFile(dataDir),
      log.highest === '' ? '0000000000000000' : log.highest,
      `${label}: the checkpoint does not cover the whole log once open`,
    )
    const logged = lastEvents(log)
    for (const [id, version] of acked.versions) {
      const record = await store.get(id)
      // A deletion still in flight when the kill came may have been made, unacknowledged (its
      // event is checked with the feed).
      if (record === undefined && !options.exact && (await store.isDeleted(id))) continue
      assert.ok(record !== undefined, `${label}: acknowledged user ${id} is missing`)
      if (options.exact) {
        assert.equal(record.user.version, version, `${label}: user ${id}'s version`)
        // Byte for byte what the change's event recorded: no field lost or stale.
        assert.deepEqual(
          JSON.parse(record.json),
          logged.get(id)?.user,
          `${label}: user ${id} is not as its event left it`,
        )
      } else {
        assert.ok(record.user.version >= version, `${label}: user ${id} went back to v${version}`)
      }
    }
    for (const id of acked.deleted) {
      assert.equal(await store.get(id), undefined, `${label}: deleted user ${id} came back`)
      assert.equal(
        await store.isDeleted(id),
        true,
        `${label}: deleted user ${id} lost its tombstone`,
      )
    }
    await checkFeed(store, acked, label)
  } finally {
    await store.close()
  }
  const allowed = new Set(options.warnings ?? [])
  const warnings = logs.filter(
    (line) => line['level'] !== 'info' && !allowed.has(String(line['msg'])) && !isTornByKill(line),
  )
  assert.deepEqual(warnings, [], `${label}: warnings at open`)
  return logs
}

/** Exactly one event per acknowledged change; per user versions 1..n in order; last event = store. */
async function checkFeed(store: FileStore, acked: Acked, label: string): Promise<void> {
  const events: ChangeEvent[] = []
  let after: string | undefined
  for (;;) {
    const page = await store.events.read({ after, limit: 1000 })
    events.push(...page.items)
    if (page.items.length < 1000) break
    after = page.nextCursor
  }
  const ids = events.map((event) => event.id)
  assert.deepEqual([...ids].sort(), ids, `${label}: event ids out of order`)
  assert.equal(new Set(ids).size, ids.length, `${label}: an event id twice`)
  const perChange = new Map<string, number>()
  const perUser = new Map<string, ChangeEvent[]>()
  for (const event of events) {
    const key = `${event.userId} ${event.version}`
    perChange.set(key, (perChange.get(key) ?? 0) + 1)
    perUser.set(event.userId, [...(perUser.get(event.userId) ?? []), event])
  }
  for (const key of acked.changes)
    assert.equal(perChange.get(key), 1, `${label}: acknowledged change ${key} has that many events`)
  let stored = 0
  for (const [userId, list] of perUser) {
    assert.deepEqual(
      list.map((event) => event.version),
      Array.from({ length: list.length }, (_, i) => i + 1),
      `${label}: versions of ${userId}`,
    )
    assert.equal(list[0]?.type, 'user.created', `${label}: ${userId}'s first event`)
    const last = list.at(-1)
    const record = await store.get(userId)
    if (last?.type === 'user.deleted') {
      assert.equal(record, undefined, `${label}: ${userId} has a deletion event but is stored`)
    } else {
      stored += 1
      assert.equal(record?.user.version, last?.version, `${label}: ${userId}'s last event`)
    }
  }
  assert.equal(store.count(), stored, `${label}: a stored user without events`)
}
