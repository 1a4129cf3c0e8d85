import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { mkdir, readdir, readFile, rename, stat, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { describe, it, type TestContext } from 'node:test'

import {
  DurableDirectory,
  makeDurableDirectory,
  syncDirectorySync,
  writeFileAtomicSync,
} from '../../../src/store/file/atomic-write.js'
import { WriteError } from '../../../src/store/write-error.js'
import type { DurableWriteObserver, DurableWriteTiming } from '../../../src/store/write-timing.js'
import { makeTempDir } from '../../helpers/service.js'

/** The timings each directory opened by openDirectory reported to its observer, in order. */
const timingsOf = new WeakMap<DurableDirectory, DurableWriteTiming[]>()

/**
 * A DurableDirectory on a fresh temp directory, closed when the test ends; its timings are kept
 * (timingsOf), and told to `observer` too when one is given.
 */
async function openDirectory(
  t: TestContext,
  observer?: DurableWriteObserver,
): Promise<DurableDirectory> {
  const dir = path.join(await makeTempDir(t, 'atomic-write-test-'), 'files')
  await mkdir(dir)
  const timings: DurableWriteTiming[] = []
  const durable = await DurableDirectory.open(dir, (timing) => {
    timings.push(timing)
    observer?.(timing)
  })
  timingsOf.set(durable, timings)
  t.after(() => durable.close())
  return durable
}

/** The timings `dir` reported from now on. */
function timingsFrom(dir: DurableDirectory): () => DurableWriteTiming[] {
  const timings = timingsOf.get(dir) ?? []
  const start = timings.length
  return () => timings.slice(start)
}

const tempFiles = async (dir: string): Promise<string[]> =>
  (await readdir(dir)).filter((name) => name.endsWith('.tmp'))

describe('DurableDirectory.writeFile', () => {
  it('creates the file with its content, mode 0600, and leaves no temp file', async (t) => {
    const dir = await openDirectory(t)
    await dir.writeFile('a.json', '{"a":1}')
    assert.equal(await readFile(path.join(dir.path, 'a.json'), 'utf8'), '{"a":1}')
    assert.equal((await stat(path.join(dir.path, 'a.json'))).mode & 0o777, 0o600)
    assert.deepEqual(await readdir(dir.path), ['a.json'])
  })

  it('replaces the content of an existing file as a new file (readers never see a mix)', async (t) => {
    const dir = await openDirectory(t)
    const file = path.join(dir.path, 'a.json')
    await dir.writeFile('a.json', 'x'.repeat(10_000))
    const before = await stat(file)
    await dir.writeFile('a.json', 'short')
    assert.equal(await readFile(file, 'utf8'), 'short')
    // A rename puts a new inode in place; an in-place rewrite would keep the old one.
    assert.notEqual((await stat(file)).ino, before.ino)
    assert.deepEqual(await readdir(dir.path), ['a.json'])
  })

  it('writes UTF-8 text as given', async (t) => {
    const dir = await openDirectory(t)
    const text = '{"name":"Zoë 🚀 \\u0000"}'
    await dir.writeFile('u.json', text)
    assert.equal(await readFile(path.join(dir.path, 'u.json'), 'utf8'), text)
  })

  it('rejects and leaves no temp file when the directory is gone, the old file intact elsewhere', async (t) => {
    const dir = await openDirectory(t)
    await dir.writeFile('a.json', 'old')
    const moved = `${dir.path}.moved`
    await rename(dir.path, moved)
    await assert.rejects(dir.writeFile('a.json', 'new'), { code: 'ENOENT' })
    assert.deepEqual(await readdir(moved), ['a.json'])
    assert.equal(await readFile(path.join(moved, 'a.json'), 'utf8'), 'old')
    await assert.rejects(stat(dir.path), { code: 'ENOENT' })
  })

  it('removes its temp file and keeps the target when the rename fails', async (t) => {
    const dir = await openDirectory(t)
    // A non-empty directory as the target: the temp file is written and synced, the rename fails.
    await mkdir(path.join(dir.path, 'a.json'))
    await writeFile(path.join(dir.path, 'a.json', 'inside'), 'old')
    await dir.writeFile('b.json', 'neighbour')
    await assert.rejects(
      dir.writeFile('a.json', 'new'),
      (error: unknown) =>
        error instanceof WriteError &&
        error.step === 'rename' &&
        (error.code === 'EISDIR' || error.code === 'ENOTEMPTY'),
    )
    assert.deepEqual((await readdir(dir.path)).sort(), ['a.json', 'b.json'])
    assert.equal(await readFile(path.join(dir.path, 'a.json', 'inside'), 'utf8'), 'old')
    assert.equal(await readFile(path.join(dir.path, 'b.json'), 'utf8'), 'neighbour')
  })

  it('calls beforeRename once the temp file is written and renames only once it resolves, with the temp file whole meanwhile', async (t) => {
    const dir = await openDirectory(t)
    await dir.writeFile('a.json', 'old')
    let open!: () => void
    const gate = new Promise<void>((resolve) => {
      open = resolve
    })
    let seen!: (names: string[]) => void
    const called = new Promise<string[]>((resolve) => {
      seen = resolve
    })
    const writing = dir.writeFile('a.json', 'new', async () => {
      seen(await tempFiles(dir.path))
      return gate
    })
    // The temp file appears, holding the whole new content, while the target keeps the old one.
    let temps: string[] = []
    while (temps.length === 0) {
      await new Promise((resolve) => setImmediate(resolve))
      temps = await tempFiles(dir.path)
    }
    const [temp] = temps
    assert.ok(temp !== undefined)
    while ((await readFile(path.join(dir.path, temp), 'utf8')) !== 'new')
      await new Promise((resolve) => setImmediate(resolve))
    assert.equal(await readFile(path.join(dir.path, 'a.json'), 'utf8'), 'old')
    assert.deepEqual(await called, [temp], 'called with the temp file already there')
    open()
    await writing
    assert.equal(await readFile(path.join(dir.path, 'a.json'), 'utf8'), 'new')
    assert.deepEqual(await tempFiles(dir.path), [])
  })

  it('throws what beforeRename rejected with, unwrapped, removes its temp file and keeps the target', async (t) => {
    const dir = await openDirectory(t)
    await dir.writeFile('a.json', 'old')
    const reason = new WriteError(
      'file-sync',
      Object.assign(new Error('EIO'), { code: 'EIO' }),
      false,
    )
    await assert.rejects(
      dir.writeFile('a.json', 'new', () => Promise.reject(reason)),
      (error: unknown) => error === reason,
    )
    assert.equal(await readFile(path.join(dir.path, 'a.json'), 'utf8'), 'old')
    assert.deepEqual(await tempFiles(dir.path), [])
  })

  it('resolves every one of many concurrent writes with every file present (group commit)', async (t) => {
    const dir = await openDirectory(t)
    const names = Array.from({ length: 50 }, (_, i) => `f${i}.json`)
    await Promise.all(names.map((name) => dir.writeFile(name, `content of ${name}`)))
    assert.deepEqual((await readdir(dir.path)).sort(), [...names].sort())
    for (const name of names)
      assert.equal(await readFile(path.join(dir.path, name), 'utf8'), `content of ${name}`)
    assert.deepEqual(await tempFiles(dir.path), [])
  })

  // Concurrent writes to one name are not ordered (the store serialises writes per user itself),
  // so the file may hold any of them, but always one whole; the next write then wins.
  it('leaves one whole write of many concurrent writes to one file, no temp file, and the next write wins', async (t) => {
    const dir = await openDirectory(t)
    const contents = Array.from({ length: 20 }, (_, i) => `${i}`.repeat(1000 + i))
    await Promise.all(contents.map((content) => dir.writeFile('same.json', content)))
    const whole = await readFile(path.join(dir.path, 'same.json'), 'utf8')
    assert.ok(contents.includes(whole), 'the file holds one whole write')
    assert.deepEqual(await readdir(dir.path), ['same.json'])
    await dir.writeFile('same.json', 'final')
    assert.equal(await readFile(path.join(dir.path, 'same.json'), 'utf8'), 'final')
  })
})

describe('DurableDirectory.sync', () => {
  it('rejects when the directory handle is closed', async (t) => {
    const dir = path.join(await makeTempDir(t, 'atomic-write-test-'), 'files')
    await mkdir(dir)
    const durable = await DurableDirectory.open(dir)
    await durable.close()
    await assert.rejects(durable.sync(), { name: 'WriteError', step: 'dir-sync', code: 'EBADF' })
  })
})

describe('writeFileAtomicSync', () => {
  it('writes and then replaces one file, leaving no temp file', async (t) => {
    const dir = await makeTempDir(t, 'atomic-write-test-')
    const file = path.join(dir, 'secret')
    writeFileAtomicSync(file, 'first')
    assert.equal(await readFile(file, 'utf8'), 'first')
    writeFileAtomicSync(file, 'second')
    assert.equal(await readFile(file, 'utf8'), 'second')
    assert.equal((await stat(file)).mode & 0o777, 0o600)
    assert.deepEqual(await readdir(dir), ['secret'])
  })

  it('throws a WriteError when the directory does not exist, creating nothing', async (t) => {
    const dir = await makeTempDir(t, 'atomic-write-test-')
    assert.throws(() => writeFileAtomicSync(path.join(dir, 'missing', 'file'), 'x'), {
      name: 'WriteError',
      step: 'write',
      code: 'ENOENT',
    })
    assert.deepEqual(await readdir(dir), [])
  })

  it('removes its temp file when the rename fails, keeping what was there', async (t) => {
    const dir = await makeTempDir(t, 'atomic-write-test-')
    // A directory at the target's name: the rename of a file over it fails (EISDIR).
    await mkdir(path.join(dir, 'taken'))
    assert.throws(() => writeFileAtomicSync(path.join(dir, 'taken'), 'x'), {
      name: 'WriteError',
      step: 'rename',
      code: 'EISDIR',
    })
    assert.deepEqual(await readdir(dir), ['taken'])
    assert.ok((await stat(path.join(dir, 'taken'))).isDirectory())
  })
})

describe('WriteError', () => {
  it('names the step, says whether the change is applied, and keeps the errno code', () => {
    const cause = Object.assign(new Error('boom'), { code: 'EIO' })
    const dirSync = new WriteError('dir-sync', cause)
    assert.equal(dirSync.name, 'WriteError')
    assert.equal(dirSync.message, 'a durable write failed at dir-sync: boom')
    assert.equal(dirSync.cause, cause)
    assert.equal(dirSync.step, 'dir-sync')
    assert.equal(dirSync.applied, true)
    assert.equal(dirSync.fsyncFailed, true)
    assert.equal(dirSync.code, 'EIO')
    for (const step of ['write', 'file-sync', 'rename'] as const) {
      const error = new WriteError(step, cause)
      assert.equal(error.applied, false, step)
      assert.equal(error.fsyncFailed, step === 'file-sync', step)
    }
    assert.equal(new WriteError('rename', cause, true).applied, true)
  })

  it('takes causes that are not errors, without a code', () => {
    const text = new WriteError('rename', 'plain text')
    assert.equal(text.message, 'a durable write failed at rename: plain text')
    assert.equal(text.code, undefined)
    assert.equal(new WriteError('write', { code: 5 }).code, undefined)
    assert.equal(new WriteError('write', null).code, undefined)
    // A promise may reject with nothing at all (a beforeRename gate, say).
    const nothing = new WriteError('rename', undefined)
    assert.equal(nothing.message, 'a durable write failed at rename: undefined')
    assert.equal(nothing.code, undefined)
  })
})

describe('DurableDirectory failures name their step', () => {
  it('fails at rename, with the errno code, when the target is a non-empty directory', async (t) => {
    const dir = await openDirectory(t)
    await mkdir(path.join(dir.path, 'a.json'))
    await writeFile(path.join(dir.path, 'a.json', 'inside'), 'old')
    await assert.rejects(dir.writeFile('a.json', 'new'), (error: unknown) => {
      assert.ok(error instanceof WriteError)
      assert.equal(error.step, 'rename')
      assert.equal(error.applied, false)
      assert.ok(error.code === 'EISDIR' || error.code === 'ENOTEMPTY', String(error.code))
      return true
    })
  })

  it('fails at write when the temp file cannot be created', async (t) => {
    const dir = await openDirectory(t)
    await rename(dir.path, `${dir.path}.moved`)
    await assert.rejects(dir.writeFile('a.json', 'new'), {
      name: 'WriteError',
      step: 'write',
      code: 'ENOENT',
    })
  })

  it('removes a file, and fails at rename with ENOENT for a missing one', async (t) => {
    const dir = await openDirectory(t)
    await dir.writeFile('a.json', 'x')
    await dir.removeFile('a.json')
    assert.deepEqual(await readdir(dir.path), [])
    await assert.rejects(dir.removeFile('a.json'), {
      name: 'WriteError',
      step: 'rename',
      code: 'ENOENT',
    })
  })

  it('moves a file into another directory, and fails at rename for a missing one', async (t) => {
    const from = await openDirectory(t)
    const to = await openDirectory(t)
    await from.writeFile('a.json', 'moved')
    await from.moveOut('a.json', to, 'b.json')
    assert.deepEqual(await readdir(from.path), [])
    assert.equal(await readFile(path.join(to.path, 'b.json'), 'utf8'), 'moved')
    await assert.rejects(from.moveOut('a.json', to, 'c.json'), {
      name: 'WriteError',
      step: 'rename',
      code: 'ENOENT',
    })
    assert.deepEqual(await readdir(to.path), ['b.json'])
  })
})

describe('DurableDirectory without its own fsyncs (a write-ahead log covers the files)', () => {
  /** The kinds of durable-write timings reported for `dir` while `work` runs. */
  async function reported(dir: DurableDirectory, work: () => Promise<unknown>) {
    const since = timingsFrom(dir)
    await work()
    await new Promise((resolve) => setImmediate(resolve))
    return since()
      .map((timing) => timing.kind)
      .sort()
  }

  it('writes and renames with no fsync of the file or the directory, and reports the write', async (t) => {
    const dir = await openDirectory(t)
    const kinds = await reported(dir, () => dir.writeFile('a.json', 'first', undefined, false))
    assert.deepEqual(kinds, ['write'])
    await dir.writeFile('a.json', 'second', undefined, false)
    assert.equal(await readFile(path.join(dir.path, 'a.json'), 'utf8'), 'second')
    assert.equal((await stat(path.join(dir.path, 'a.json'))).mode & 0o777, 0o600)
    assert.deepEqual(await tempFiles(dir.path), [])
  })

  it('fails at write when the temp file cannot be created, and at rename when the rename fails, leaving no temp file', async (t) => {
    const dir = await openDirectory(t)
    await mkdir(path.join(dir.path, 'a.json'))
    await writeFile(path.join(dir.path, 'a.json', 'inside'), 'old')
    const kinds = await reported(dir, () =>
      assert.rejects(dir.writeFile('a.json', 'new', undefined, false), {
        name: 'WriteError',
        step: 'rename',
        applied: false,
      }),
    )
    assert.deepEqual(kinds, ['write'], 'a failed write is reported too')
    assert.deepEqual(await tempFiles(dir.path), [])
    assert.equal(await readFile(path.join(dir.path, 'a.json', 'inside'), 'utf8'), 'old')
    await rename(dir.path, `${dir.path}.moved`)
    await assert.rejects(dir.writeFile('b.json', 'new', undefined, false), {
      name: 'WriteError',
      step: 'write',
      code: 'ENOENT',
    })
  })

  it('removes a file with a directory fsync when durable (the default), and without one when not', async (t) => {
    const dir = await openDirectory(t)
    await dir.writeFile('a.json', 'a', undefined, false)
    await dir.writeFile('b.json', 'b', undefined, false)
    assert.deepEqual(await reported(dir, () => dir.removeFile('a.json')), ['dir-sync'])
    assert.deepEqual(await reported(dir, () => dir.removeFile('b.json', false)), [])
    assert.deepEqual(await readdir(dir.path), [])
  })

  it('fsyncs a file by name (true, reported), answers false for one that is gone, and fails at write when it cannot be opened', async (t) => {
    const dir = await openDirectory(t)
    await dir.writeFile('a.json', 'a', undefined, false)
    let synced: boolean | undefined
    const kinds = await reported(dir, async () => {
      synced = await dir.syncFile('a.json')
    })
    assert.equal(synced, true)
    assert.deepEqual(kinds, ['file-sync'])
    assert.equal(await dir.syncFile('gone.json'), false)
    // A name under a file: open fails with ENOTDIR, which is no fsync that failed.
    await assert.rejects(dir.syncFile('a.json/inside'), (error: unknown) => {
      assert.ok(error instanceof WriteError)
      assert.equal(error.step, 'write')
      assert.equal(error.code, 'ENOTDIR')
      assert.equal(error.fsyncFailed, false)
      return true
    })
  })
})

describe('DurableDirectory timings (the observer it is opened with)', () => {
  it('reports the file fsync, the directory fsync and the whole write, in seconds, for this directory', async (t) => {
    const dir = await openDirectory(t)
    const since = timingsFrom(dir)
    const started = performance.now()
    await dir.writeFile('a.json', 'x')
    await new Promise((resolve) => setImmediate(resolve))
    const elapsedSeconds = (performance.now() - started) / 1000
    const timings = since()
    assert.deepEqual(timings.map((timing) => timing.kind).sort(), [
      'dir-sync',
      'file-sync',
      'write',
    ])
    for (const timing of timings) {
      assert.equal(timing.dir, dir.path)
      assert.ok(
        timing.seconds >= 0 && timing.seconds <= elapsedSeconds,
        `${timing.kind}: ${timing.seconds} s`,
      )
    }
  })

  it('reports a failed write too', async (t) => {
    const dir = await openDirectory(t)
    const since = timingsFrom(dir)
    await rename(dir.path, `${dir.path}.moved`)
    await assert.rejects(dir.writeFile('a.json', 'x'), {
      name: 'WriteError',
      step: 'write',
      code: 'ENOENT',
    })
    assert.deepEqual(
      since().map((timing) => timing.kind),
      ['write'],
    )
  })

  it('never fails a write for an observer that throws', async (t) => {
    let told = 0
    const dir = await openDirectory(t, () => {
      told += 1
      throw new Error('observer failure')
    })
    await dir.writeFile('a.json', 'x')
    await dir.writeFile('b.json', 'y', undefined, false)
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(told, 4)
    assert.equal(await readFile(path.join(dir.path, 'a.json'), 'utf8'), 'x')
    assert.equal(await readFile(path.join(dir.path, 'b.json'), 'utf8'), 'y')
  })
})

describe('makeDurableDirectory and syncDirectorySync', () => {
  it('creates missing parents with mode 0700 and says whether it made anything', async (t) => {
    const root = await makeTempDir(t, 'atomic-write-test-')
    const dir = path.join(root, 'a', 'b', 'c')
    assert.equal(makeDurableDirectory(dir), true)
    assert.equal((await stat(dir)).isDirectory(), true)
    assert.equal((await stat(path.join(root, 'a'))).mode & 0o777, 0o700)
    assert.equal(makeDurableDirectory(dir), false)
    assert.equal(makeDurableDirectory(path.join(root, 'a', 'd')), true)
    assert.deepEqual((await readdir(path.join(root, 'a'))).sort(), ['b', 'd'])
  })

  it('fsyncs an existing directory and throws for a missing one', async (t) => {
    const root = await makeTempDir(t, 'atomic-write-test-')
    syncDirectorySync(root)
    assert.throws(
      () => {
        syncDirectorySync(path.join(root, 'missing'))
      },
      { code: 'ENOENT' },
    )
  })
})

describe('DurableDirectory group commit and handles', () => {
  it('runs one directory fsync for the first caller and one shared fsync for all who came while it ran', async (t) => {
    let syncs = 0
    const dir = await openDirectory(t, (timing) => {
      if (timing.kind === 'dir-sync') syncs += 1
    })
    await Promise.all(Array.from({ length: 10 }, () => dir.sync()))
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(syncs, 2)
    await dir.sync()
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(syncs, 3)
  })

  it('fails a directory fsync at dir-sync, as applied', async (t) => {
    const dir = path.join(await makeTempDir(t, 'atomic-write-test-'), 'files')
    await mkdir(dir)
    const durable = await DurableDirectory.open(dir)
    await durable.close()
    await assert.rejects(durable.sync(), (error: unknown) => {
      assert.ok(error instanceof WriteError)
      assert.equal(error.step, 'dir-sync')
      assert.equal(error.applied, true)
      return true
    })
  })

  it('closes every file descriptor it opens (syncDirectorySync, writeFileAtomicSync)', {
    skip: !existsSync('/proc/self/fd') && 'no /proc/self/fd here',
  }, async (t) => {
    const root = await makeTempDir(t, 'atomic-write-test-')
    const openFds = async (): Promise<number> => (await readdir('/proc/self/fd')).length
    syncDirectorySync(root)
    writeFileAtomicSync(path.join(root, 'warm-up.json'), 'x')
    const before = await openFds()
    for (let i = 0; i < 20; i += 1) {
      syncDirectorySync(root)
      writeFileAtomicSync(path.join(root, `f${i}.json`), 'x')
    }
    assert.equal(await openFds(), before)
  })
})
