import assert from 'node:assert/strict'
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { eventIdNumber } from '../../../src/domain/event.js'
import { DurableDirectory } from '../../../src/store/file/atomic-write.js'
import { Checkpoint, type CheckpointOptions } from '../../../src/store/file/checkpoint.js'
import { readCheckpoint, removeCheckpointTemps } from '../../../src/store/file/checkpoint-file.js'
import { FileStore } from '../../../src/store/file/file-store.js'
import { WriteError } from '../../../src/store/write-error.js'
import type { DurableWriteTiming } from '../../../src/store/write-timing.js'
import { sleep } from '../../helpers/child.js'
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
