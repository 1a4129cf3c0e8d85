import assert from 'node:assert/strict'
import { appendFile, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { eventIdNumber, formatEventId } from '../../../src/domain/event.js'
import type { UserRecord } from '../../../src/domain/user.js'
import { DurableDirectory } from '../../../src/store/file/atomic-write.js'
import { checkpointJson, readCheckpoint } from '../../../src/store/file/checkpoint-file.js'
import { FileStore } from '../../../src/store/file/file-store.js'
import { type Replayed, replayTail } from '../../../src/store/file/replay.js'
import { WriteError } from '../../../src/store/write-error.js'
import type { DurableWriteObserver, DurableWriteTiming } from '../../../src/store/write-timing.js'
import { makeTempDir } from '../../helpers/service.js'
import { changeUser, makeUser } from '../../helpers/store-users.js'

/**
 * A data directory whose store made these changes and stopped cleanly (its checkpoint at the
 * newest event); the test then takes back what a crash would have lost.
 */
async function changedBy(
  t: TestContext,
  changes: (store: FileStore) => Promise<void>,
): Promise<string> {
  const dataDir = path.join(await makeTempDir(t, 'replay-test-'), 'data')
  const store = new FileStore({ dataDir, checkpointMs: 3_600_000 })
  await store.open()
  try {
    await changes(store)
  } finally {
    await store.close()
  }
  return dataDir
}

/** The files of users/ (or tombstones/), by name, with their text. */
async function filesOf(dir: string): Promise<Map<string, string>> {
  const files = new Map<string, string>()
  for (const name of (await readdir(dir)).sort())
    files.set(name, await readFile(path.join(dir, name), 'utf8'))
  return files
}

/** As a crash after the event `through` was checkpointed would leave it: no user or tombstone file. */
async function lose(dataDir: string, through: number | undefined): Promise<void> {
  for (const dir of ['users', 'tombstones'])
    for (const name of await readdir(path.join(dataDir, dir)))
      await rm(path.join(dataDir, dir, name))
  await rm(path.join(dataDir, 'users.snapshot'), { force: true })
  const file = path.join(dataDir, 'checkpoint.json')
  if (through === undefined) await rm(file)
  else await writeFile(file, checkpointJson(through))
}

async function replay(
  t: TestContext,
  dataDir: string,
  timings?: DurableWriteObserver,
): Promise<Replayed> {
  const open = async (name: string): Promise<DurableDirectory> => {
    const opened = await DurableDirectory.open(path.join(dataDir, name), timings)
    t.after(() => opened.close())
    return opened
  }
  return replayTail({
    eventsDir: path.join(dataDir, 'events'),
    users: await open('users'),
    graves: await open('tombstones'),
    keys: await open('keys'),
    root: await open(''),
    now: Date.now(),
  })
}

/** The ids of the log's events, in order (ids start from the clock: see idFloor). */
async function eventIds(dataDir: string): Promise<number[]> {
  const text = await readFile(await segmentOf(dataDir), 'utf8')
  return text
    .split('\n')
    .filter((line) => line.startsWith('{"id":'))
    .map((line) => eventIdNumber(line.slice(7, 23)))
}

/** The one segment of the log (these tests write far fewer events than a segment holds). */
async function segmentOf(dataDir: string): Promise<string> {
  const names = (await readdir(path.join(dataDir, 'events'))).filter((name) =>
    name.endsWith('.ndjson'),
  )
  assert.equal(names.length, 1, names.join())
  return path.join(dataDir, 'events', names[0] ?? '')
}

describe('replayTail', () => {
  it("writes each user's last event past the checkpoint again, and buries the deleted", async (t) => {
    let a: UserRecord | undefined
    let b: UserRecord | undefined
    let c: UserRecord | undefined
    const dataDir = await changedBy(t, async (store) => {
      a = await store.create(makeUser())
      b = await store.create(makeUser())
      c = await store.create(makeUser())
      await store.update(a.user.id, (current) => changeUser(current.user, { name: 'Again' }))
      await store.delete(b.user.id)
    })
    assert.ok(a !== undefined && b !== undefined && c !== undefined)
    const users = await filesOf(path.join(dataDir, 'users'))
    const graves = await filesOf(path.join(dataDir, 'tombstones'))
    const ids = await eventIds(dataDir)
    await lose(dataDir, ids[1])
    // The deleted user's file back, as a crash between the tombstone and the unlink leaves it.
    await writeFile(path.join(dataDir, 'users', `${b.user.id}.json`), b.json)
    // c's file as its event left it: the same version is written again all the same.
    await writeFile(path.join(dataDir, 'users', `${c.user.id}.json`), c.json)
    const timings: DurableWriteTiming[] = []
    const replayed = await replay(t, dataDir, (timing) => timings.push(timing))
    assert.deepEqual(replayed, {
      through: ids[4],
      events: 3,
      written: 2,
      buried: 1,
      keys: 0,
      checkpoint: 'found',
    })
    assert.deepEqual(await filesOf(path.join(dataDir, 'users')), users)
    assert.deepEqual(await filesOf(path.join(dataDir, 'tombstones')), graves)
    assert.equal(readCheckpoint(dataDir), ids[4])
    const synced = timings
      .filter((timing) => timing.kind.endsWith('sync'))
      .map((timing) => `${path.basename(timing.dir)} ${timing.kind}`)
      .sort()
    assert.deepEqual(
      synced,
      [
        'data dir-sync',
        'data file-sync',
        'keys dir-sync',
        'tombstones dir-sync',
        'tombstones file-sync',
        'users dir-sync',
        'users file-sync',
        'users file-sync',
      ],
      'each file written fsynced, then the three directories, then the checkpoint file',
    )
  })

  it('skips voided events, lines that are not events and a torn last line, and keeps a file newer than its event', async (t) => {
    let a: UserRecord | undefined
    let d: UserRecord | undefined
    const dataDir = await changedBy(t, async (store) => {
      a = await store.create(makeUser())
      await store.update(a.user.id, (current) => changeUser(current.user, { name: 'Voided' }))
      d = await store.create(makeUser())
    })
    assert.ok(a !== undefined && d !== undefined)
    const users = await filesOf(path.join(dataDir, 'users'))
    const ids = await eventIds(dataDir)
    const [, updated = 0, newest = 0] = ids
    await lose(dataDir, 0)
    const segment = await segmentOf(dataDir)
    const lines = (await readFile(segment, 'utf8')).split('\n')
    const torn = lines[2]?.replace(formatEventId(newest), formatEventId(newest + 1)) ?? ''
    await appendFile(segment, `{"void":"${formatEventId(updated)}"}\nnot an event\n`)
    // A second copy of a's first event, as a damaged log could hold: written once, and not the
    // newest (the count of events past the checkpoint is of lines: it counts it again).
    await appendFile(segment, `${lines[0]}\n`)
    await appendFile(segment, Buffer.from([0x7b, 0xff, 0xfe, 0x0a]))
    await appendFile(segment, torn.slice(0, -1))
    // d's file as a change without an event would leave it: a higher version than its event's.
    const dFile = path.join(dataDir, 'users', `${d.user.id}.json`)
    const newer = (users.get(`${d.user.id}.json`) ?? '').replace('"version":1', '"version":7')
    await writeFile(dFile, newer)
    // a's file cut short, as no write of the store leaves it (each is a rename): written again.
    await writeFile(path.join(dataDir, 'users', `${a.user.id}.json`), '{"id":')
    const replayed = await replay(t, dataDir)
    assert.deepEqual(replayed, {
      through: newest,
      events: 4,
      written: 1,
      buried: 0,
      keys: 0,
      checkpoint: 'found',
    })
    assert.equal(await readFile(dFile, 'utf8'), newer, 'the newer file kept')
    assert.equal(
      await readFile(path.join(dataDir, 'users', `${a.user.id}.json`), 'utf8'),
      a.json,
      'a as its first event left it: the update was voided',
    )
  })

  it('without a checkpoint file, writes nothing and records the newest id', async (t) => {
    const dataDir = await changedBy(t, async (store) => {
      await store.create(makeUser())
      await store.create(makeUser())
    })
    const ids = await eventIds(dataDir)
    await lose(dataDir, undefined)
    assert.deepEqual(await replay(t, dataDir), {
      through: ids[1],
      events: 0,
      written: 0,
      buried: 0,
      keys: 0,
      checkpoint: 'missing',
    })
    assert.deepEqual([...(await filesOf(path.join(dataDir, 'users'))).keys()], [])
    assert.equal(readCheckpoint(dataDir), ids[1])
  })

  it('with a damaged checkpoint file, replays the whole log, more users than one batch', async (t) => {
    const dataDir = await changedBy(t, async (store) => {
      for (let i = 0; i < 70; i += 1) await store.create(makeUser())
    })
    const users = await filesOf(path.join(dataDir, 'users'))
    const ids = await eventIds(dataDir)
    await lose(dataDir, 0)
    await writeFile(path.join(dataDir, 'checkpoint.json'), '{"through":"damaged"}\n')
    assert.deepEqual(await replay(t, dataDir), {
      through: ids[69],
      events: 70,
      written: 70,
      buried: 0,
      keys: 0,
      checkpoint: 'damaged',
    })
    assert.deepEqual(await filesOf(path.join(dataDir, 'users')), users)
    assert.equal(readCheckpoint(dataDir), ids[69])
  })

  it('leaves a checkpoint with nothing past it as it is, and removes the temp files of a cut write', async (t) => {
    const dataDir = await changedBy(t, async (store) => {
      await store.create(makeUser())
    })
    const file = path.join(dataDir, 'checkpoint.json')
    const before = await stat(file)
    const temp = path.join(dataDir, '.checkpoint.json.k2x9.tmp')
    await writeFile(temp, '{"through":')
    const [id] = await eventIds(dataDir)
    assert.deepEqual(await replay(t, dataDir), {
      through: id,
      events: 0,
      written: 0,
      buried: 0,
      keys: 0,
      checkpoint: 'found',
    })
    assert.equal((await stat(file)).ino, before.ino, 'not written again')
    await assert.rejects(stat(temp), { code: 'ENOENT' })
  })
  it('reads from the segment that holds the event after the checkpoint, and past it', async (t) => {
    const dataDir = await changedBy(t, async (store) => {
      for (let i = 0; i < 5; i += 1) await store.create(makeUser())
    })
    const users = await filesOf(path.join(dataDir, 'users'))
    const ids = await eventIds(dataDir)
    // The log as a roll-over leaves it: the first three events in one segment, the rest in the next.
    const segment = await segmentOf(dataDir)
    const lines = (await readFile(segment, 'utf8')).split('\n').filter((line) => line !== '')
    await writeFile(segment, `${lines.slice(0, 3).join('\n')}\n`)
    const second = path.join(dataDir, 'events', `${formatEventId(ids[3] ?? 0)}.ndjson`)
    await writeFile(second, `${lines.slice(3).join('\n')}\n`)
    await lose(dataDir, ids[0])
    assert.deepEqual(await replay(t, dataDir), {
      through: ids[4],
      events: 4,
      written: 4,
      buried: 0,
      keys: 0,
      checkpoint: 'found',
    })
    const [first] = users.keys()
    assert.deepEqual(
      await filesOf(path.join(dataDir, 'users')),
      new Map([...users].filter(([name]) => name !== first)),
    )
  })

  it('keeps a checkpoint past the newest event of the log', async (t) => {
    const dataDir = await changedBy(t, async (store) => {
      await store.create(makeUser())
    })
    const [id = 0] = await eventIds(dataDir)
    await lose(dataDir, id + 10)
    const replayed = await replay(t, dataDir)
    assert.deepEqual([replayed.through, replayed.events, replayed.written], [id + 10, 0, 0])
    assert.equal(readCheckpoint(dataDir), id + 10)
  })

  it("fails when a deleted user's file cannot be removed, and leaves the checkpoint behind", async (t) => {
    let gone: UserRecord | undefined
    const dataDir = await changedBy(t, async (store) => {
      gone = await store.create(makeUser())
      await store.delete(gone.user.id)
    })
    assert.ok(gone !== undefined)
    await lose(dataDir, 0)
    // A directory under the file's name: unlink refuses it (EISDIR), which is no ENOENT.
    await mkdir(path.join(dataDir, 'users', `${gone.user.id}.json`, 'in-the-way'), {
      recursive: true,
    })
    await assert.rejects(replay(t, dataDir), (error: unknown) => {
      assert.ok(error instanceof WriteError, String(error))
      return true
    })
    assert.equal(readCheckpoint(dataDir), 0)
  })
  it("writes a user's last whole event when a damaged copy of it comes first or a later line lacks its user", async (t) => {
    let second: UserRecord | undefined
    const dataDir = await changedBy(t, async (store) => {
      const a = await store.create(makeUser())
      second = await store.update(a.user.id, (current) => changeUser(current.user, { name: 'Two' }))
    })
    assert.ok(second !== undefined)
    const [, id = 0] = await eventIds(dataDir)
    await lose(dataDir, 0)
    const segment = await segmentOf(dataDir)
    const [created = '', updated = ''] = (await readFile(segment, 'utf8')).split('\n')
    // Before the update, a copy of it whose name is not UTF-8; after it, a later event of the
    // same user without its user (eventJson writes one only for a deletion).
    const copy = Buffer.from(`${updated}\n`)
    copy[copy.indexOf('"name":"Two"') + 8] = 0xff
    const bare = `${updated.slice(0, updated.indexOf(',"user":'))}}`
    const later = bare.replace(formatEventId(id), formatEventId(id + 1))
    await writeFile(
      segment,
      Buffer.concat([Buffer.from(`${created}\n`), copy, Buffer.from(`${updated}\n${later}\n`)]),
    )
    assert.deepEqual(await replay(t, dataDir), {
      through: id,
      events: 2,
      written: 1,
      buried: 0,
      keys: 0,
      checkpoint: 'found',
    })
    const file = path.join(dataDir, 'users', `${second.user.id}.json`)
    assert.equal(await readFile(file, 'utf8'), second.json)
  })

  it('replays none of the damaged lines a log may hold, and reads no file of events/ but its segments', async (t) => {
    let a: UserRecord | undefined
    const dataDir = await changedBy(t, async (store) => {
      a = await store.create(makeUser())
    })
    assert.ok(a !== undefined)
    const [id = 0] = await eventIds(dataDir)
    await lose(dataDir, 0)
    const segment = await segmentOf(dataDir)
    const line = (await readFile(segment, 'utf8')).split('\n')[0] ?? ''
    const later = (n: number): string => line.replace(formatEventId(id), formatEventId(id + n))
    // Voids that are damaged, and an id past what a number holds exactly.
    const voids = [`{"void":"zz{"void":"${formatEventId(id)}"}`, `{"void":"${formatEventId(id)}"}x`]
    await appendFile(
      segment,
      `${[...voids, '{"void":"xyz"}', line.replace(formatEventId(id), 'ffffffffffffffff')].join('\n')}\n`,
    )
    // a's event again with later ids: its name's first byte not UTF-8, then behind a byte-order mark.
    const name = Buffer.from(`"name":${JSON.stringify(a.user.name)}`)
    const bytes = Buffer.from(`${later(1)}\n`)
    bytes[bytes.indexOf(name) + 8] = 0xff
    await appendFile(segment, Buffer.concat([bytes, Buffer.from(`\ufeff${later(2)}\n`)]))
    await writeFile(path.join(dataDir, 'events', 'notes.txt'), `${later(3)}\n`)
    // A byte before the brace, and an id said twice: JSON.parse takes either, the log does not.
    const twice = later(5).replace('"type":', `"id":"${formatEventId(id + 6)}","type":`)
    await appendFile(segment, ` ${later(4)}\n${twice}\n`)
    assert.deepEqual(await replay(t, dataDir), {
      through: id,
      events: 1,
      written: 1,
      buried: 0,
      keys: 0,
      checkpoint: 'found',
    })
    assert.equal(await readFile(path.join(dataDir, 'users', `${a.user.id}.json`), 'utf8'), a.json)
  })
})
