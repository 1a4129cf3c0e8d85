import assert from 'node:assert/strict'
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { eventIdNumber } from '../../../src/domain/event.js'
import { DurableDirectory } from '../../../src/store/file/atomic-write.js'
import { Checkpoint, type CheckpointOptions } from '../../../src/store/file/checkpoint.js'
import {
  checkpointJson,
  readCheckpoint,
  removeCheckpointTemps,
} from '../../../src/store/file/checkpoint-file.js'
import { FileStore } from '../../../src/store/file/file-store.js'
import { WriteError } from '../../../src/store/write-error.js'
import type { DurableWriteTiming } from '../../../src/store/write-timing.js'
import { sleep } from '../../helpers/child.js'
import { waitFor } from '../../helpers/ops.js'
import { makeTempDir } from '../../helpers/service.js'
import { makeUser } from '../../helpers/store-users.js'

/**
 * users/, tombstones/ and the data directory itself, opened; closed when the test ends. Their
 * timings are kept: `timingsUnder(dir)` reads those reported under `dir` from then on.
 */
async function openDirs(t: TestContext) {
  const root = await makeTempDir(t, 'checkpoint-test-')
  const reported: DurableWriteTiming[] = []
  const open = async (dir: string): Promise<DurableDirectory> => {
    const opened = await DurableDirectory.open(dir, (timing) => reported.push(timing))
    t.after(() => opened.close())
    return opened
  }
  for (const name of ['users', 'tombstones', 'keys']) await mkdir(path.join(root, name))
  const timingsUnder = (dir: string): (() => DurableWriteTiming[]) => {
    const start = reported.length
    return () => reported.slice(start).filter((timing) => timing.dir.startsWith(dir))
  }
  return {
    root,
    timingsUnder,
    users: await open(path.join(root, 'users')),
    graves: await open(path.join(root, 'tombstones')),
    keys: await open(path.join(root, 'keys')),
    data: await open(root),
  }
}

/** A checkpoint on the test's directories that runs only when asked and throws what fails. */
function manualCheckpoint(
  dirs: Awaited<ReturnType<typeof openDirs>>,
  options: Pick<CheckpointOptions, 'logged' | 'through'> & Partial<CheckpointOptions>,
): Checkpoint {
  const { users, graves, keys, data } = dirs
  return new Checkpoint({
    users,
    graves,
    keys,
    root: data,
    intervalMs: 3_600_000,
    paused: () => false,
    failed: (error) => {
      throw error
    },
    ...options,
  })
}

describe('readCheckpoint', () => {
  it('reads the id of a whole checkpoint file, undefined without one, and damaged for anything else', async (t) => {
    const dir = await makeTempDir(t, 'checkpoint-read-')
    assert.equal(readCheckpoint(dir), undefined)
    const file = path.join(dir, 'checkpoint.json')
    for (const [text, expected] of [
      ['{"through":"00000000000000ff"}\n', 255],
      ['{"through":"0000000000000000"}', 0],
      ['{"through":"00000000000000FF"}\n', 'damaged'],
      ['{"through":"0000000000000ff"}\n', 'damaged'],
      ['{"through":"00000000000000ff","x":1}\n', 'damaged'],
      [' {"through":"00000000000000ff"}\n', 'damaged'],
      ['{"through":"00000000000000ff"}\n\n', 'damaged'],
      ['{"through":"ffffffffffffffff"}\n', 'damaged'],
      ['', 'damaged'],
    ] as const) {
      await writeFile(file, text)
      assert.equal(readCheckpoint(dir), expected, JSON.stringify(text))
    }
  })
})

describe('removeCheckpointTemps', () => {
  it('removes only the temp files of checkpoint writes, and fsyncs the directory when it removed one', async (t) => {
    const { root, data, timingsUnder } = await openDirs(t)
    const timings = timingsUnder(root)
    assert.equal(await removeCheckpointTemps(data), 0)
    assert.deepEqual(
      timings().map((timing) => timing.kind),
      [],
    )
    for (const name of [
      '.checkpoint.json.0a1b2c3d4e5fz9.tmp',
      '.checkpoint.json.tmp',
      '.x.json.0a.tmp',
    ])
      await writeFile(path.join(root, name), '')
    assert.equal(await removeCheckpointTemps(data), 1)
    await sleep(10)
    assert.deepEqual(
      timings().map((timing) => timing.kind),
      ['dir-sync'],
    )
    assert.deepEqual((await readdir(root)).sort(), [
      '.checkpoint.json.tmp',
      '.x.json.0a.tmp',
      'keys',
      'tombstones',
      'users',
    ])
  })
})

describe('Checkpoint', () => {
  it('fsyncs again, at the next run, the files of a run that failed short of an fsync, and only then moves', async (t) => {
    const dirs = await openDirs(t)
    const { root, users, graves, timingsUnder } = dirs
    await writeFile(path.join(users.path, 'a.json'), 'a')
    await writeFile(path.join(graves.path, 'b.json'), 'b')
    const failures: unknown[] = []
    const checkpoint = manualCheckpoint(dirs, {
      logged: () => 2,
      through: 0,
      failed: (error) => failures.push(error),
    })
    checkpoint.touched('users', 'a.json')
    checkpoint.touched('tombstones', 'b.json')
    const timings = timingsUnder(users.path)
    // The checkpoint file cannot be written while the data directory is away from its path.
    await rename(root, `${root}.away`)
    try {
      await checkpoint.settle()
    } finally {
      await rename(`${root}.away`, root)
    }
    assert.equal(failures.length, 1)
    assert.ok(
      failures[0] instanceof WriteError && failures[0].step === 'write',
      String(failures[0]),
    )
    assert.equal(checkpoint.through, 0, 'a failed run does not move')
    assert.equal(checkpoint.dirty, 2, 'its files wait for the next run')
    const before = timings().length
    await checkpoint.settle()
    assert.equal(failures.length, 1)
    assert.equal(checkpoint.through, 2)
    assert.equal(checkpoint.dirty, 0)
    assert.deepEqual(
      timings()
        .slice(before)
        .map((timing) => timing.kind)
        .sort(),
      ['dir-sync', 'file-sync'],
      'the user file and users/ synced again',
    )
    assert.equal(
      await readFile(path.join(root, 'checkpoint.json'), 'utf8'),
      '{"through":"0000000000000002"}\n',
    )
  })

  it('never names an event whose file step still runs, and does nothing while paused', async (t) => {
    const dirs = await openDirs(t)
    const { root } = dirs
    let paused = true
    const checkpoint = manualCheckpoint(dirs, {
      logged: () => 9,
      through: 3,
      paused: () => paused,
    })
    checkpoint.begin('u1', 5)
    checkpoint.begin('u2', 7)
    await checkpoint.settle()
    assert.equal(readCheckpoint(root), undefined, 'paused: nothing written')
    paused = false
    await checkpoint.settle()
    assert.equal(checkpoint.through, 4, 'below the oldest event still running')
    checkpoint.end('u1')
    await checkpoint.settle()
    assert.equal(checkpoint.through, 6)
    checkpoint.end('u2')
    await checkpoint.settle()
    assert.equal(readCheckpoint(root), 9)
  })

  it('never names an id a start skipped: it stays at the newest event before them until the first after them is covered', async (t) => {
    const dirs = await openDirs(t)
    const { root } = dirs
    // The log held events up to 9; this start numbers from 1,000 (idFloor).
    let logged = 9
    const checkpoint = manualCheckpoint(dirs, {
      logged: () => logged,
      through: 9,
      skipped: { last: 9, first: 1000 },
    })
    checkpoint.begin('u1', 1000)
    logged = 1000
    await checkpoint.settle()
    assert.equal(checkpoint.through, 9, 'not 999: no event has it')
    assert.equal(readCheckpoint(root), undefined, 'nothing to write')
    checkpoint.end('u1')
    await checkpoint.settle()
    assert.equal(readCheckpoint(root), 1000)
  })

  it('stays behind an event whose key line is unwritten, and fsyncs its journal and keys/ before it moves', async (t) => {
    const dirs = await openDirs(t)
    const { root, keys, timingsUnder } = dirs
    let logged = 4
    const checkpoint = manualCheckpoint(dirs, {
      logged: () => logged,
      through: 2,
    })
    checkpoint.holdEvent(4)
    logged = 6
    await checkpoint.settle()
    assert.equal(checkpoint.through, 3, 'below the held event')
    await writeFile(path.join(keys.path, '2026-11-30T18.keys'), '{}\n')
    checkpoint.touched('keys', '2026-11-30T18.keys')
    checkpoint.releaseEvent(4)
    const timings = timingsUnder(keys.path)
    await checkpoint.settle()
    assert.equal(readCheckpoint(root), 6)
    assert.deepEqual(
      timings()
        .map((timing) => timing.kind)
        .sort(),
      ['dir-sync', 'file-sync'],
      'the journal and keys/ synced',
    )
  })
})

describe('Checkpoint bookkeeping', () => {
  /** The kinds of the timings reported under each directory, sorted. */
  function kindsByDir(dirs: Awaited<ReturnType<typeof openDirs>>) {
    const timings = dirs.timingsUnder(dirs.root)
    return (): Record<string, string[]> => {
      const kinds: Record<string, string[]> = {}
      for (const timing of timings()) {
        const dir = path.basename(timing.dir)
        kinds[dir] = [...(kinds[dir] ?? []), timing.kind].sort()
      }
      return kinds
    }
  }

  it('keeps the oldest event of a user whose file step failed until a later change rewrites the file', async (t) => {
    const dirs = await openDirs(t)
    let logged = 5
    const checkpoint = manualCheckpoint(dirs, { logged: () => logged, through: 2 })
    checkpoint.hold('nobody')
    assert.equal(checkpoint.idle, true, 'no change of that user runs: nothing held')
    checkpoint.begin('u1', 5)
    checkpoint.hold('u1')
    assert.equal(checkpoint.idle, false, 'running and held')
    checkpoint.end('u1')
    assert.equal(checkpoint.idle, false, 'held')
    logged = 7
    checkpoint.begin('u1', 7)
    checkpoint.hold('u1')
    checkpoint.end('u1')
    await checkpoint.settle()
    assert.equal(checkpoint.through, 4, 'below the first failed step, not the second')
    logged = 8
    checkpoint.begin('u1', 8)
    checkpoint.rewritten('u1')
    checkpoint.end('u1')
    assert.equal(checkpoint.idle, true)
    await checkpoint.settle()
    assert.equal(checkpoint.through, 8)
  })

  it('counts the files of all three directories, and is idle only once nothing waits', async (t) => {
    const dirs = await openDirs(t)
    const kinds = kindsByDir(dirs)
    const checkpoint = manualCheckpoint(dirs, { logged: () => 0, through: 0 })
    assert.deepEqual([checkpoint.dirty, checkpoint.idle], [0, true])
    await writeFile(path.join(dirs.keys.path, 'k.keys'), '{}\n')
    checkpoint.touched('keys', 'k.keys')
    assert.deepEqual([checkpoint.dirty, checkpoint.idle], [1, false])
    checkpoint.touched('users', 'a.json')
    checkpoint.touched('tombstones', 'b.json')
    assert.equal(checkpoint.dirty, 3)
    await checkpoint.settle()
    assert.deepEqual([checkpoint.dirty, checkpoint.idle], [0, true])
    // a.json and b.json are gone (removed since): only k.keys is fsynced, and all three directories.
    assert.deepEqual(kinds(), {
      keys: ['dir-sync', 'file-sync'],
      tombstones: ['dir-sync'],
      users: ['dir-sync'],
    })
    assert.equal(readCheckpoint(dirs.root), undefined, 'through did not move: no checkpoint file')
    checkpoint.touched('tombstones')
    checkpoint.touched('users')
    checkpoint.touched('keys')
    assert.deepEqual([checkpoint.dirty, checkpoint.idle], [0, false], 'files only removed')
    const before = kinds()
    await checkpoint.settle()
    assert.deepEqual(kinds().tombstones, [...(before.tombstones ?? []), 'dir-sync'].sort())
    assert.deepEqual(kinds().users?.length, (before.users?.length ?? 0) + 1)
    checkpoint.holdEvent(1)
    assert.equal(checkpoint.idle, false)
    checkpoint.begin('u1', 1)
    assert.equal(checkpoint.idle, false, 'running, and its key line unwritten')
    checkpoint.releaseEvent(1)
    assert.equal(checkpoint.idle, false)
    checkpoint.end('u1')
    assert.equal(checkpoint.idle, true)
  })

  it('writes an owed file before it passes its event, and not while a later change has taken it', async (t) => {
    const dirs = await openDirs(t)
    const kinds = kindsByDir(dirs)
    let logged = 3
    const checkpoint = manualCheckpoint(dirs, { logged: () => logged, through: 2 })
    assert.throws(() => checkpoint.owe('u1', 'u1.json', '{}'), /no change of user u1 is running/)
    assert.equal(checkpoint.takeOwed('u1.json'), undefined)
    assert.equal(checkpoint.idle, true, 'taking nothing holds nothing back')
    checkpoint.begin('u1', 3)
    checkpoint.owe('u1', 'u1.json', '{"v":1}')
    checkpoint.end('u1')
    assert.deepEqual([checkpoint.owed, checkpoint.dirty], [1, 0])
    const owed = checkpoint.takeOwed('u1.json')
    assert.deepEqual(owed, { userId: 'u1', json: '{"v":1}', eventId: 3 })
    assert.equal(checkpoint.owed, 0)
    logged = 4
    await checkpoint.settle()
    assert.equal(checkpoint.through, 2, 'the taken file is not written yet')
    if (owed !== undefined) checkpoint.reowe('u1.json', owed)
    checkpoint.end('u1')
    await checkpoint.settle()
    assert.equal(checkpoint.through, 4)
    assert.equal(checkpoint.owed, 0)
    assert.equal(await readFile(path.join(dirs.users.path, 'u1.json'), 'utf8'), '{"v":1}')
    assert.deepEqual(kinds().users, ['dir-sync'], 'users/ fsynced for the owed file alone')
  })

  it('writes owed files even when the checkpoint cannot move, and shows the batch writing them', async (t) => {
    const dirs = await openDirs(t)
    const checkpoint = manualCheckpoint(dirs, { logged: () => 6, through: 4 })
    checkpoint.begin('u2', 5)
    checkpoint.begin('u1', 6)
    checkpoint.owe('u1', 'u1.json', '{"v":6}')
    checkpoint.end('u1')
    assert.equal(checkpoint.owedWriting('u1.json'), undefined, 'waiting, not being written')
    const running = checkpoint.settle()
    let writing: Promise<void> | undefined
    for (let i = 0; i < 1000 && writing === undefined; i += 1) {
      writing = checkpoint.owedWriting('u1.json')
      if (writing === undefined) await new Promise(setImmediate)
    }
    assert.ok(writing instanceof Promise, 'a later change of u1 has this batch to wait for')
    await writing
    assert.equal(await readFile(path.join(dirs.users.path, 'u1.json'), 'utf8'), '{"v":6}')
    await running
    assert.deepEqual([checkpoint.through, checkpoint.owed], [4, 0], 'held back by u2, u1 written')
    assert.equal(checkpoint.owedWriting('u1.json'), undefined)
  })

  it('ends the thread that writes owed files when it is closed', async (t) => {
    const dirs = await openDirs(t)
    const threads = async (): Promise<number> =>
      Number(/^Threads:\s+(\d+)$/m.exec(await readFile('/proc/self/status', 'utf8'))?.[1])
    const checkpoint = manualCheckpoint(dirs, { logged: () => 1, through: 0 })
    const before = await threads()
    checkpoint.begin('u1', 1)
    checkpoint.owe('u1', 'u1.json', '{}')
    checkpoint.end('u1')
    await checkpoint.settle()
    assert.ok((await threads()) > before, 'a writer thread started')
    await checkpoint.close()
    // Its thread exits just after `terminate` resolves; the writer's own idle stop is 5 s away.
    const after = await waitFor(
      'the writer thread to end',
      async () => {
        const now = await threads()
        return now > before ? undefined : now
      },
      1000,
      10,
    )
    assert.equal(after, before)
  })

  it('never runs two at once: one asked for while another runs waits for it', async (t) => {
    const dirs = await openDirs(t)
    const gates: (() => void)[] = []
    let entered = 0
    let active = 0
    let most = 0
    // The data directory, with each write of the checkpoint file held until the test opens it.
    const root = new Proxy(dirs.data, {
      get(target, property) {
        if (property === 'writeFile')
          return async (...args: Parameters<DurableDirectory['writeFile']>) => {
            entered += 1
            active += 1
            most = Math.max(most, active)
            await new Promise<void>((resolve) => gates.push(resolve))
            try {
              return await target.writeFile(...args)
            } finally {
              active -= 1
            }
          }
        const value: unknown = Reflect.get(target, property, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const until = (done: () => boolean): Promise<true> =>
      waitFor('a run at its checkpoint file', () => done() || undefined, 2000, 5)
    let logged = 1
    const checkpoint = manualCheckpoint(dirs, { logged: () => logged, through: 0, root })
    const first = checkpoint.settle()
    await until(() => entered === 1)
    logged = 2
    const second = checkpoint.settle()
    gates.shift()?.()
    await first
    await until(() => entered === 2)
    logged = 3
    const third = checkpoint.settle()
    await sleep(50)
    assert.deepEqual([entered, most], [2, 1], 'the third waits for the second')
    gates.shift()?.()
    await until(() => entered === 3)
    gates.shift()?.()
    await Promise.all([second, third])
    assert.deepEqual([checkpoint.through, most, readCheckpoint(dirs.root)], [3, 1, 3])
  })

  it('after a failed run, fsyncs again the directories of the files it wrote or was given', async (t) => {
    const dirs = await openDirs(t)
    // Only the last step fails: a directory where the checkpoint file would be renamed to.
    const failingLastStep = async (run: () => Promise<void>): Promise<void> => {
      const file = path.join(dirs.root, 'checkpoint.json')
      const kept = readCheckpoint(dirs.root)
      await rm(file, { force: true })
      await mkdir(path.join(file, 'in-the-way'), { recursive: true })
      try {
        await run()
      } finally {
        await rm(file, { recursive: true })
        if (typeof kept === 'number') await writeFile(file, checkpointJson(kept))
      }
    }
    const kinds = kindsByDir(dirs)
    let logged = 1
    const failures: unknown[] = []
    let successes = 0
    const checkpoint = manualCheckpoint(dirs, {
      logged: () => logged,
      through: 0,
      failed: (error) => failures.push(error),
      succeeded: () => {
        successes += 1
      },
    })
    checkpoint.begin('u1', 1)
    checkpoint.owe('u1', 'u1.json', '{}')
    checkpoint.end('u1')
    await writeFile(path.join(dirs.keys.path, 'k.keys'), '{}\n')
    checkpoint.touched('keys', 'k.keys')
    await failingLastStep(() => checkpoint.settle())
    assert.deepEqual([failures.length, successes, checkpoint.through], [1, 0, 0])
    assert.equal(await readFile(path.join(dirs.users.path, 'u1.json'), 'utf8'), '{}', 'written')
    const before = kinds()
    await checkpoint.settle()
    assert.deepEqual([failures.length, successes, checkpoint.through], [1, 1, 1])
    const after = kinds()
    assert.equal(after.users?.length, (before.users?.length ?? 0) + 1, 'users/ again')
    assert.equal(after.keys?.length, (before.keys?.length ?? 0) + 2, 'k.keys and keys/ again')
    assert.equal(after.tombstones, undefined, 'tombstones/ had nothing')
    logged = 2
    await writeFile(path.join(dirs.graves.path, 'g.json'), '{}')
    checkpoint.touched('tombstones', 'g.json')
    await failingLastStep(() => checkpoint.settle())
    const failed = kinds()
    await checkpoint.settle()
    assert.deepEqual([failures.length, successes, checkpoint.through], [2, 2, 2])
    assert.deepEqual(kinds().users, failed.users, 'users/ not again: no file of it was written')
    assert.equal(kinds().tombstones?.length, (failed.tombstones?.length ?? 0) + 2)
  })

  it('runs on its timer once started, never twice at once, and no more once stopped', async (t) => {
    const dirs = await openDirs(t)
    let logged = 1
    let successes = 0
    const checkpoint = manualCheckpoint(dirs, {
      logged: () => logged,
      through: 0,
      intervalMs: 20,
      succeeded: () => {
        successes += 1
      },
    })
    checkpoint.start()
    checkpoint.start()
    await waitFor('a run on the timer', () => checkpoint.through >= 1 || undefined, 2000, 10)
    assert.equal(checkpoint.through, 1)
    checkpoint.stop()
    await sleep(60)
    logged = 2
    await sleep(100)
    assert.equal(checkpoint.through, 1, 'no run after stop')
    await checkpoint.settle()
    assert.equal(checkpoint.through, 2, 'settle still runs one')
    assert.ok(successes >= 2)
  })

  it('starts one run at the 4,096th file waiting, not before, and no second while it runs', async (t) => {
    const dirs = await openDirs(t)
    let successes = 0
    const checkpoint = manualCheckpoint(dirs, {
      logged: () => 0,
      through: 0,
      succeeded: () => {
        successes += 1
      },
    })
    // Names of files removed since: each costs one failed open, not an fsync.
    for (let i = 0; i < 4095; i += 1) checkpoint.touched('users', `gone-${i}.json`)
    await sleep(50)
    assert.deepEqual([successes, checkpoint.dirty], [0, 4095])
    checkpoint.touched('users', 'gone-4095.json')
    checkpoint.touched('users', 'gone-4096.json')
    await waitFor('the run the count starts', () => successes > 0 || undefined, 2000, 10)
    await sleep(50)
    assert.deepEqual([successes, checkpoint.dirty], [1, 0])
  })
})

describe('FileStore checkpoints', () => {
  it('starts one once 4,096 files wait, long before its interval', {
    timeout: 60_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'checkpoint-count-'), 'data')
    const store = new FileStore({ dataDir, checkpointMs: 3_600_000 })
    await store.open()
    t.after(() => store.close())
    for (let i = 0; i < 4095; i += 64)
      await Promise.all(
        Array.from({ length: Math.min(64, 4095 - i) }, () => store.create(makeUser())),
      )
    await sleep(200)
    assert.equal(readCheckpoint(dataDir), 0, '4,095 files: no checkpoint yet')
    await store.create(makeUser())
    const newest = eventIdNumber(await store.events.head())
    let through = readCheckpoint(dataDir)
    // Up to 45 s: the checkpoint syncs 4,096 files, which a loaded disk may take seconds to do.
    for (let i = 0; i < 1800 && through === 0; i += 1) {
      await sleep(25)
      through = readCheckpoint(dataDir)
    }
    assert.equal(through, newest, 'through the 4,096th event')
  })
})
