import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import {
  chmod,
  mkdir,
  readdir,
  readFile,
  readlink,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { UserRecord } from '../../../src/domain/user.js'
import { FileStore } from '../../../src/store/file/file-store.js'
import type { DurableWriteTiming } from '../../../src/store/write-timing.js'
import { listLockFiles } from '../../helpers/data-files.js'
import { createMemoryLogger, makeTempDir } from '../../helpers/service.js'
import { describeStoreContract, listAll, snapshotStore } from '../../helpers/store-suite.js'
import { changeUser, makeUser, toContractJson } from '../../helpers/store-users.js'

const isRoot = process.getuid?.() === 0

async function newDataDir(t: TestContext): Promise<string> {
  return path.join(await makeTempDir(t, 'file-store-test-'), 'data')
}

interface OpenedStore {
  store: FileStore
  logs: Record<string, unknown>[]
}

/** Opens a FileStore on `dataDir` with a logger that keeps its lines; closed when the test ends. */
async function openFileStore(t: TestContext, dataDir: string): Promise<OpenedStore> {
  const logs: Record<string, unknown>[] = []
  const store = new FileStore({ dataDir, logger: createMemoryLogger(logs) })
  await store.open()
  t.after(() => store.close())
  return { store, logs }
}

/** Every plain file of a directory tree, by relative path, with its content. */
/** A data directory with `users/` and `quarantine/`, and a user file name to put in them. */
async function quarantineCase(
  t: TestContext,
): Promise<{ dataDir: string; usersDir: string; quarantineDir: string; name: string }> {
  const dataDir = await newDataDir(t)
  const usersDir = path.join(dataDir, 'users')
  const quarantineDir = path.join(dataDir, 'quarantine')
  await mkdir(usersDir, { recursive: true })
  await mkdir(quarantineDir, { recursive: true })
  return { dataDir, usersDir, quarantineDir, name: `${makeUser().id}.json` }
}

async function readTree(dir: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {}
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  for (const entry of entries) {
    if (!entry.isFile()) continue
    const full = path.join(entry.parentPath, entry.name)
    files[path.relative(dir, full)] = await readFile(full, 'utf8')
  }
  return Object.fromEntries(Object.entries(files).sort(([a], [b]) => (a < b ? -1 : 1)))
}

const modeOf = async (file: string): Promise<number> => (await stat(file)).mode & 0o777

const warnings = (logs: readonly Record<string, unknown>[]): string[] =>
  logs.filter((line) => line['level'] === 'warn').map((line) => JSON.stringify(line))

/**
 * Makes every write into the users directory fail until the returned function runs. chmod 0500
 * does not stop root, so as root a plain file takes the directory's place meanwhile.
 */
/** The errno of a write into the directory breakUsersDir broke: not writable, or not a directory. */
const BROKEN_DIR_ERRNO = isRoot ? 'ENOTDIR' : 'EACCES'

/**
 * Matches the store's refusal of a failed write: storage_unavailable, caused by the WriteError of
 * `step` with one of `errnos`. Any other error (a crash, a refusal for another reason) fails.
 */
function failedWrite(
  step: 'write' | 'rename',
  errnos: readonly string[],
): (error: unknown) => boolean {
  return (error) => {
    const found = error as {
      code?: unknown
      cause?: { name?: unknown; step?: unknown; code?: unknown; applied?: unknown }
    }
    assert.equal(found.code, 'storage_unavailable', String(error))
    assert.deepEqual(
      [found.cause?.name, found.cause?.step, found.cause?.applied],
      ['WriteError', step, false],
    )
    assert.ok(
      errnos.includes(String(found.cause?.code)),
      `errno ${String(found.cause?.code)}, expected one of ${errnos.join(', ')}`,
    )
    return true
  }
}

async function breakUsersDir(store: FileStore): Promise<() => Promise<void>> {
  if (!isRoot) {
    await chmod(store.usersDir, 0o500)
    return () => chmod(store.usersDir, 0o700)
  }
  const aside = `${store.usersDir}.aside`
  await rename(store.usersDir, aside)
  await writeFile(store.usersDir, 'not a directory')
  return async () => {
    await rm(store.usersDir)
    await rename(aside, store.usersDir)
  }
}

/** Runs a child that stays alive until the test ends, for a lock held by a live process. */
function spawnLiveProcess(t: TestContext): number {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' })
  t.after(() => {
    child.kill('SIGKILL')
  })
  if (child.pid === undefined) throw new Error('could not spawn a child')
  return child.pid
}

describeStoreContract(
  'FileStore',
  async (t) => new FileStore({ dataDir: await newDataDir(t), watchIntervalMs: 20 }),
)

describe('FileStore: files on disk', () => {
  it('writes users/<id>.json (mode 0600) holding the user JSON, in directories of mode 0700', async (t) => {
    const dataDir = await newDataDir(t)
    const { store } = await openFileStore(t, dataDir)
    const user = makeUser({ metadata: { team: 'analytics' } })
    const record = await store.create(user)
    const file = path.join(dataDir, 'users', `${user.id}.json`)
    const text = await readFile(file, 'utf8')
    assert.equal(text, record.json)
    assert.equal(text, toContractJson(user))
    assert.deepEqual(JSON.parse(text), user)
    assert.equal(await modeOf(file), 0o600)
    assert.equal(await modeOf(dataDir), 0o700)
    assert.equal(await modeOf(path.join(dataDir, 'users')), 0o700)
  })

  it('rewrites the file on update, and on delete writes a tombstone then removes the file, leaving no temp files', async (t) => {
    const dataDir = await newDataDir(t)
    const { store } = await openFileStore(t, dataDir)
    const created = await store.create(makeUser())
    const file = path.join(store.usersDir, `${created.user.id}.json`)
    const next = await store.update(created.user.id, (current) =>
      changeUser(current.user, { name: 'Renamed' }),
    )
    assert.equal(await readFile(file, 'utf8'), next.json)
    assert.equal(await modeOf(file), 0o600)
    await store.delete(created.user.id, () => undefined)
    const grave = path.join(store.tombstonesDir, `${created.user.id}.json`)
    const tombstone = JSON.parse(await readFile(grave, 'utf8')) as Record<string, unknown>
    assert.deepEqual(Object.keys(tombstone), ['id', 'deletedAt'])
    assert.equal(tombstone['id'], created.user.id)
    assert.equal(await modeOf(grave), 0o600)
    assert.deepEqual(await readdir(store.usersDir), [])
    assert.deepEqual(await readdir(store.tombstonesDir), [`${created.user.id}.json`])
    assert.equal(await store.get(created.user.id), undefined)
    assert.equal(await store.isDeleted(created.user.id), true)
  })

  it('keeps disk and memory equal after many concurrent writes, with no temp files left', async (t) => {
    const dataDir = await newDataDir(t)
    const { store } = await openFileStore(t, dataDir)
    const created = await Promise.all(Array.from({ length: 30 }, () => store.create(makeUser())))
    await Promise.all(
      created.flatMap((record) =>
        [1, 2].map(() => store.update(record.user.id, (current) => changeUser(current.user))),
      ),
    )
    const records = await listAll(store)
    assert.equal(records.length, 30)
    const expected = Object.fromEntries(
      records.map((record) => [`${record.user.id}.json`, record.json]),
    )
    assert.deepEqual(await readTree(store.usersDir), expected)
    assert.ok(records.every((record) => record.user.version === 3))
  })

  it('holds a DATA_DIR/.lock.<n> with its pid while open and removes it at close', async (t) => {
    const dataDir = await newDataDir(t)
    const store = new FileStore({ dataDir })
    await store.open()
    const [lock, ...others] = listLockFiles(dataDir)
    assert.deepEqual(others, [])
    assert.match(
      await readFile(path.join(dataDir, lock ?? ''), 'utf8'),
      new RegExp(`^${process.pid} [0-9a-f]+\n$`),
    )
    await store.close()
    assert.deepEqual(listLockFiles(dataDir), [])
  })

  it('refuses to open a data directory locked by a live process, leaving the lock', async (t) => {
    const dataDir = await newDataDir(t)
    await mkdir(dataDir, { recursive: true })
    const lockFile = path.join(dataDir, '.lock')
    const pid = spawnLiveProcess(t)
    await writeFile(lockFile, `${pid}\n`)
    const store = new FileStore({ dataDir })
    await assert.rejects(
      store.open(),
      (error: unknown) =>
        error instanceof Error && error.name === 'LockError' && error.message.includes(String(pid)),
    )
    assert.equal(await readFile(lockFile, 'utf8'), `${pid}\n`)
  })
})

describe('FileStore: timings', () => {
  it('tells the observer it was built with how long its own writes took, and no other store', async (t) => {
    const stores = await Promise.all(
      [0, 1].map(async () => {
        const timings: DurableWriteTiming[] = []
        const store = new FileStore({
          dataDir: await newDataDir(t),
          timings: (timing) => timings.push(timing),
          // No checkpoint runs meanwhile: only the writes of the changes below are told.
          checkpointMs: 3_600_000,
        })
        await store.open()
        t.after(() => store.close())
        // What the open wrote (its first checkpoint) is left out.
        const opened = timings.length
        const since = () => timings.slice(opened).map((timing) => [timing.kind, timing.dir])
        return { store, timings, since }
      }),
    )
    const [first, second] = stores
    assert.ok(first !== undefined && second !== undefined)
    assert.ok(first.timings.every((timing) => timing.dir.startsWith(first.store.dataDir)))
    await first.store.create(makeUser())
    // The log's append, then the user file renamed into place unsynced (the log covers it).
    assert.deepEqual(first.since(), [
      ['log-sync', first.store.eventsDir],
      ['write', first.store.usersDir],
    ])
    assert.ok(first.timings.every((timing) => timing.seconds >= 0 && timing.seconds < 60))
    assert.deepEqual(second.since(), [], 'a write of one store is never told to another')
    await second.store.create(makeUser())
    assert.deepEqual(second.since(), [
      ['log-sync', second.store.eventsDir],
      ['write', second.store.usersDir],
    ])
    assert.equal(first.since().length, 2)
  })
})

describe('FileStore: a write that fails', () => {
  it('keeps memory and disk as they were when a create fails, and frees its email', async (t) => {
    const { store } = await openFileStore(t, await newDataDir(t))
    await store.create(makeUser())
    const disk = await readTree(store.usersDir)
    const memory = await snapshotStore(store)
    const user = makeUser({ email: 'taken.then.freed@example.com' })
    const restore = await breakUsersDir(store)
    try {
      await assert.rejects(store.create(user), failedWrite('write', [BROKEN_DIR_ERRNO]))
    } finally {
      await restore()
    }
    assert.equal(await store.get(user.id), undefined)
    assert.deepEqual(await snapshotStore(store), memory)
    assert.deepEqual(await readTree(store.usersDir), disk)
    const again = await store.create(makeUser({ email: 'Taken.Then.Freed@example.com' }))
    assert.equal(
      await readFile(path.join(store.usersDir, `${again.user.id}.json`), 'utf8'),
      again.json,
    )
  })

  it('keeps memory and disk as they were when an update fails, and accepts the next update', async (t) => {
    const { store } = await openFileStore(t, await newDataDir(t))
    const created = await store.create(makeUser({ email: 'before@example.com' }))
    const disk = await readTree(store.usersDir)
    const restore = await breakUsersDir(store)
    try {
      await assert.rejects(
        store.update(created.user.id, (current) =>
          changeUser(current.user, { email: 'after@example.com' }),
        ),
        failedWrite('write', [BROKEN_DIR_ERRNO]),
      )
    } finally {
      await restore()
    }
    assert.deepEqual(await store.get(created.user.id), created)
    assert.deepEqual(await readTree(store.usersDir), disk)
    // The failed write's email claim is gone and the old email is still held.
    await store.create(makeUser({ email: 'after@example.com' }))
    await assert.rejects(store.create(makeUser({ email: 'before@example.com' })), {
      code: 'duplicate_email',
    })
    const next = await store.update(created.user.id, (current) => changeUser(current.user))
    assert.equal(next.user.version, 2)
    assert.equal(
      await readFile(path.join(store.usersDir, `${created.user.id}.json`), 'utf8'),
      next.json,
    )
  })

  it('commits a delete whose unlink fails once its event is logged: gone from memory, degraded, and ended on disk by the replay at the next open', async (t) => {
    const dataDir = await newDataDir(t)
    const { store, logs } = await openFileStore(t, dataDir)
    const created = await store.create(makeUser())
    const restore = await breakUsersDir(store)
    try {
      await store.delete(created.user.id, () => undefined)
    } finally {
      await restore()
    }
    assert.equal(await store.get(created.user.id), undefined)
    assert.equal(await store.isDeleted(created.user.id), true)
    assert.equal(store.health().state, 'degraded')
    assert.deepEqual(
      logs.filter((line) => line['level'] === 'error').map((line) => [line['msg'], line['step']]),
      [['a committed change could not be written to its file; the log keeps it', 'rename']],
    )
    assert.deepEqual(Object.keys(await readTree(store.usersDir)), [`${created.user.id}.json`])
    await store.close()

    const { store: reopened } = await openFileStore(t, dataDir)
    assert.equal(await reopened.get(created.user.id), undefined)
    assert.equal(await reopened.isDeleted(created.user.id), true)
    assert.deepEqual(await readTree(reopened.usersDir), {})
  })

  it('commits a create whose rename fails once its event is logged: in memory, no temp file left, and written by the replay at the next open', async (t) => {
    const dataDir = await newDataDir(t)
    const { store } = await openFileStore(t, dataDir)
    const user = makeUser({ email: 'blocked@example.com' })
    // A non-empty directory where the file should go: the temp file is written, the rename fails.
    const blocker = path.join(store.usersDir, `${user.id}.json`)
    await mkdir(blocker)
    await writeFile(path.join(blocker, 'keep'), 'x')
    const record = await store.create(user)
    assert.deepEqual(await store.get(user.id), record)
    assert.equal(store.health().state, 'degraded')
    assert.deepEqual(await readdir(store.usersDir), [`${user.id}.json`])
    assert.deepEqual(await readTree(store.usersDir), {
      [path.join(`${user.id}.json`, 'keep')]: 'x',
    })
    await assert.rejects(store.create(makeUser({ email: 'blocked@example.com' })), {
      code: 'duplicate_email',
    })
    await rm(blocker, { recursive: true })
    await store.close()

    const { store: reopened } = await openFileStore(t, dataDir)
    assert.equal((await reopened.get(user.id))?.json, record.json)
    assert.equal(
      await readFile(path.join(reopened.usersDir, `${user.id}.json`), 'utf8'),
      record.json,
    )
  })
})

describe('FileStore: reopening', () => {
  it('loads every user with the same JSON, versions and ETags after close', async (t) => {
    const dataDir = await newDataDir(t)
    const first = new FileStore({ dataDir })
    await first.open()
    const records: UserRecord[] = []
    for (let i = 0; i < 6; i += 1)
      records.push(await first.create(makeUser({ email: `Person${i}@Example.com` })))
    const [a, b, , , gone] = records.map((record) => record.user.id)
    await first.update(a ?? '', (current) => changeUser(current.user, { name: 'Changed once' }))
    await first.update(b ?? '', (current) => changeUser(current.user, { status: 'active' }))
    await first.update(b ?? '', (current) => changeUser(current.user, { metadata: { k: 'v' } }))
    await first.delete(gone ?? '', () => undefined)
    const before = (await listAll(first)).map((record) => [
      record.json,
      record.etag,
      record.emailKey,
    ])
    await first.close()

    const { store: second } = await openFileStore(t, dataDir)
    const after = (await listAll(second)).map((record) => [
      record.json,
      record.etag,
      record.emailKey,
    ])
    assert.deepEqual(after, before)
    assert.equal(after.length, 5)
    assert.equal((await second.get(b ?? ''))?.etag, '"v3"')
    assert.equal(await second.get(gone ?? ''), undefined)
    await assert.rejects(second.create(makeUser({ email: 'person1@example.COM' })), {
      code: 'duplicate_email',
    })
    // The reloaded store keeps accepting writes at the next version.
    const next = await second.update(a ?? '', (current) => changeUser(current.user))
    assert.equal(next.etag, '"v3"')
  })

  it('remembers deleted ids after a reopen, and refuses to create a user with one', async (t) => {
    const dataDir = await newDataDir(t)
    const first = new FileStore({ dataDir })
    await first.open()
    const gone = await first.create(makeUser())
    await first.delete(gone.user.id, () => undefined)
    await first.close()

    const { store: second, logs } = await openFileStore(t, dataDir)
    assert.equal(await second.isDeleted(gone.user.id), true)
    assert.equal(await second.get(gone.user.id), undefined)
    await assert.rejects(second.create(makeUser({ id: gone.user.id })), /already exists or existed/)
    const loaded = logs.find((line) => line['msg'] === 'users loaded')
    assert.equal(loaded?.['deleted'], 1)
    assert.equal(loaded?.['users'], 0)
  })

  it('keeps the user when its tombstone was written but its file never removed (an unfinished delete)', async (t) => {
    const dataDir = await newDataDir(t)
    const first = new FileStore({ dataDir })
    await first.open()
    const kept = await first.create(makeUser())
    await first.close()
    // What a crash between the tombstone write and the unlink leaves behind.
    const graves = path.join(dataDir, 'tombstones')
    await writeFile(
      path.join(graves, `${kept.user.id}.json`),
      JSON.stringify({ id: kept.user.id, deletedAt: kept.user.createdAt }),
    )
    await writeFile(path.join(graves, `.${kept.user.id}.json.0a1b2c.tmp`), '{"id":')

    const { store: second } = await openFileStore(t, dataDir)
    assert.equal((await second.get(kept.user.id))?.json, kept.json)
    assert.equal(await second.isDeleted(kept.user.id), false)
    assert.deepEqual(await readdir(graves), [], 'the stale tombstone and the temp file are gone')
  })

  it('moves a file in tombstones/ that is not a tombstone to quarantine/ and counts it', async (t) => {
    const dataDir = await newDataDir(t)
    const graves = path.join(dataDir, 'tombstones')
    await mkdir(graves, { recursive: true })
    const user = makeUser()
    await writeFile(path.join(graves, `${user.id}.json`), toContractJson(user))
    const { store, logs } = await openFileStore(t, dataDir)
    assert.equal(await store.isDeleted(user.id), false)
    assert.deepEqual(await readdir(graves), [])
    assert.equal(
      await readFile(path.join(dataDir, 'quarantine', `${user.id}.json`), 'utf8'),
      toContractJson(user),
    )
    assert.equal(logs.find((line) => line['msg'] === 'users loaded')?.['quarantined'], 1)
  })

  it('reloads metadata keys __proto__ and constructor as own keys', async (t) => {
    const dataDir = await newDataDir(t)
    const first = new FileStore({ dataDir })
    await first.open()
    const metadata = JSON.parse('{"__proto__":"polluted","constructor":"x"}') as Record<
      string,
      string
    >
    const created = await first.create(makeUser({ metadata }))
    await first.close()
    const { store } = await openFileStore(t, dataDir)
    const loaded = await store.get(created.user.id)
    assert.equal(loaded?.json, created.json)
    assert.deepEqual(Object.keys(loaded.user.metadata), ['__proto__', 'constructor'])
    assert.equal(
      Object.getOwnPropertyDescriptor(loaded.user.metadata, '__proto__')?.value,
      'polluted',
    )
    assert.equal(Object.hasOwn(Object.prototype, 'polluted'), false)
    assert.equal(Object.getPrototypeOf({}), Object.prototype)
  })
})

describe('FileStore: recovery at open', () => {
  it('removes leftover temp files and keeps the files they were replacing', async (t) => {
    const dataDir = await newDataDir(t)
    const usersDir = path.join(dataDir, 'users')
    await mkdir(usersDir, { recursive: true })
    const kept = makeUser()
    const neverCreated = makeUser()
    await writeFile(path.join(usersDir, `${kept.id}.json`), toContractJson(kept))
    const newer = toContractJson(changeUser(kept, { name: 'Half written' }))
    await writeFile(path.join(usersDir, `.${kept.id}.json.0123456789ab.tmp`), newer.slice(0, 20))
    await writeFile(
      path.join(usersDir, `.${neverCreated.id}.json.abcdef012345.tmp`),
      toContractJson(neverCreated),
    )
    const { store, logs } = await openFileStore(t, dataDir)
    assert.equal((await store.get(kept.id))?.json, toContractJson(kept))
    assert.equal(await store.get(neverCreated.id), undefined)
    assert.deepEqual(await readdir(usersDir), [`${kept.id}.json`])
    await assert.rejects(stat(path.join(dataDir, 'quarantine')), { code: 'ENOENT' })
    assert.deepEqual(warnings(logs), [])
  })

  it('moves unparsable user files unchanged to quarantine/ with a warn line, and loads the rest', async (t) => {
    const dataDir = await newDataDir(t)
    const usersDir = path.join(dataDir, 'users')
    await mkdir(usersDir, { recursive: true })
    const good = [makeUser(), makeUser()]
    for (const user of good)
      await writeFile(path.join(usersDir, `${user.id}.json`), toContractJson(user))
    const other = makeUser()
    const { version: _version, ...withoutVersion } = makeUser()
    const bad: Record<string, string> = {
      torn: toContractJson(makeUser()).slice(0, 57),
      empty: '',
      shape: JSON.stringify(withoutVersion),
      metadata: toContractJson(makeUser()).replace('"metadata":{}', '"metadata":{"n":1}'),
      array: '[]',
      // A whole, valid user, but under another user's file name.
      misnamed: toContractJson(other),
    }
    const badFiles: Record<string, string> = {}
    for (const content of Object.values(bad)) {
      const name = `${makeUser().id}.json`
      badFiles[name] = content
      await writeFile(path.join(usersDir, name), content)
    }
    const { store, logs } = await openFileStore(t, dataDir)

    assert.deepEqual(
      (await listAll(store)).map((record) => record.json),
      good.map(toContractJson),
    )
    assert.equal(await store.get(other.id), undefined)
    const quarantineDir = path.join(dataDir, 'quarantine')
    const expected = Object.fromEntries(
      Object.entries(badFiles).sort(([x], [y]) => (x < y ? -1 : 1)),
    )
    assert.deepEqual(await readTree(quarantineDir), expected)
    assert.equal(await modeOf(quarantineDir), 0o700)
    assert.deepEqual((await readdir(usersDir)).sort(), good.map((user) => `${user.id}.json`).sort())
    const warned = warnings(logs)
    for (const name of Object.keys(badFiles)) {
      assert.ok(
        warned.some((line) => line.includes(name)),
        `no warn line names ${name}: ${warned.join('\n')}`,
      )
    }
  })

  it('never overwrites a file already in quarantine', async (t) => {
    const { dataDir, usersDir, quarantineDir, name } = await quarantineCase(t)
    await writeFile(path.join(quarantineDir, name), 'quarantined earlier')
    await writeFile(path.join(usersDir, name), '{"torn": ')
    const first = new FileStore({ dataDir })
    await first.open()
    await first.close()
    await writeFile(path.join(usersDir, name), '{"torn again": ')
    await openFileStore(t, dataDir)
    const files = await readTree(quarantineDir)
    assert.equal(files[name], 'quarantined earlier')
    assert.deepEqual(Object.values(files).sort(), [
      'quarantined earlier',
      '{"torn again": ',
      '{"torn": ',
    ])
    assert.ok(
      Object.keys(files).every((file) => file.startsWith(name)),
      Object.keys(files).join(', '),
    )
    assert.deepEqual(await readdir(usersDir), [])
  })

  it('never replaces a link already in quarantine, even one that leads nowhere', async (t) => {
    const { dataDir, usersDir, quarantineDir, name } = await quarantineCase(t)
    // A link quarantined by an earlier start, whose target is gone.
    await symlink(path.join(dataDir, 'gone.json'), path.join(quarantineDir, name))
    await writeFile(path.join(usersDir, name), '{"torn": ')
    await openFileStore(t, dataDir)
    const names = (await readdir(quarantineDir)).sort()
    assert.equal(names.length, 2, names.join(', '))
    assert.equal(await readlink(path.join(quarantineDir, name)), path.join(dataDir, 'gone.json'))
    assert.deepEqual(Object.values(await readTree(quarantineDir)), ['{"torn": '])
  })

  it("keeps a user's file and its tombstone both when they go to quarantine in one millisecond", async (t) => {
    const { dataDir, quarantineDir, name } = await quarantineCase(t)
    await mkdir(path.join(dataDir, 'tombstones'), { recursive: true })
    await writeFile(path.join(quarantineDir, name), 'quarantined earlier')
    await writeFile(path.join(dataDir, 'users', name), '{"torn user": ')
    await writeFile(path.join(dataDir, 'tombstones', name), '{"torn tombstone": ')
    // Both moves take the same time-stamped name when the clock has not moved between them.
    const now = Date.now()
    t.mock.method(Date, 'now', () => now)
    await openFileStore(t, dataDir)
    t.mock.restoreAll()
    assert.deepEqual(Object.values(await readTree(quarantineDir)).sort(), [
      'quarantined earlier',
      '{"torn tombstone": ',
      '{"torn user": ',
    ])
  })

  it('keeps a shared email for the older user on disk and quarantines the newer', async (t) => {
    const dataDir = await newDataDir(t)
    const usersDir = path.join(dataDir, 'users')
    await mkdir(usersDir, { recursive: true })
    const older = makeUser({ email: 'Same@Example.com' })
    const newer = makeUser({ email: 'same@example.COM' })
    // The newer file is written first, so that file age cannot be what decides.
    await writeFile(path.join(usersDir, `${newer.id}.json`), toContractJson(newer))
    await writeFile(path.join(usersDir, `${older.id}.json`), toContractJson(older))
    const { store, logs } = await openFileStore(t, dataDir)
    assert.equal((await store.get(older.id))?.json, toContractJson(older))
    assert.equal(await store.get(newer.id), undefined)
    assert.deepEqual(await readTree(path.join(dataDir, 'quarantine')), {
      [`${newer.id}.json`]: toContractJson(newer),
    })
    assert.ok(warnings(logs).some((line) => line.includes(`${newer.id}.json`)))
    await assert.rejects(store.create(makeUser({ email: 'SAME@example.com' })), {
      code: 'duplicate_email',
    })
  })

  it('leaves files that are not user files alone and loads the users beside them', async (t) => {
    const dataDir = await newDataDir(t)
    const usersDir = path.join(dataDir, 'users')
    await mkdir(path.join(usersDir, 'archive'), { recursive: true })
    const user = makeUser()
    const stranger = makeUser()
    await writeFile(path.join(usersDir, `${user.id}.json`), toContractJson(user))
    const others: Record<string, string> = {
      'notes.txt': 'hello',
      README: 'not a user',
      'not-a-uuid.json': '{"id": "x"}',
      [`${stranger.id.toUpperCase()}.json`]: toContractJson(stranger),
      [`${stranger.id}.json.bak`]: '{"torn',
      [path.join('archive', `${stranger.id}.json`)]: '{"torn',
    }
    for (const [name, content] of Object.entries(others))
      await writeFile(path.join(usersDir, name), content)
    const before = await readTree(usersDir)
    const { store } = await openFileStore(t, dataDir)
    assert.deepEqual(await readTree(usersDir), before)
    assert.deepEqual(
      (await listAll(store)).map((record) => record.user.id),
      [user.id],
    )
    await assert.rejects(stat(path.join(dataDir, 'quarantine')), { code: 'ENOENT' })
  })
})

describe('FileStore: ids from outside', () => {
  /** A data directory with one stored user and a user-shaped file outside users/ to aim at. */
  async function setUp(
    t: TestContext,
  ): Promise<{ store: FileStore; dataDir: string; held: UserRecord }> {
    const dataDir = await newDataDir(t)
    const { store } = await openFileStore(t, dataDir)
    const held = await store.create(makeUser())
    const victim = makeUser()
    await writeFile(path.join(dataDir, 'victim.json'), toContractJson(victim))
    return { store, dataDir, held }
  }

  it('answers get, update and delete of ids it does not hold without touching any path', async (t) => {
    const { store, dataDir, held } = await setUp(t)
    const before = await readTree(dataDir)
    const heldId = held.user.id
    for (const id of [
      '../victim',
      `../users/${heldId}`,
      `${heldId}/../${heldId}`,
      heldId.toUpperCase(),
      '',
    ]) {
      assert.equal(await store.get(id), undefined, id)
      let called = false
      await assert.rejects(
        store.update(id, (current) => {
          called = true
          return changeUser(current.user)
        }),
        { code: 'not_found' },
        id,
      )
      await assert.rejects(
        store.delete(id, () => {
          called = true
        }),
        { code: 'not_found' },
        id,
      )
      assert.equal(called, false, id)
    }
    assert.deepEqual(await readTree(dataDir), before)
  })

  it('does not unlink a path built from an unknown id when delete has no check', async (t) => {
    const { store, dataDir } = await setUp(t)
    const before = await readTree(dataDir)
    await assert.rejects(store.delete('../victim'), { code: 'not_found' })
    assert.deepEqual(await readTree(dataDir), before)
  })
})
