import assert from 'node:assert/strict'
import { appendFile, readdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { ConfigError, parseConfig } from '../../../src/process/config.js'
import { FileStore } from '../../../src/store/file/file-store.js'
import { MemoryStore } from '../../../src/store/memory-store.js'
import type { Store } from '../../../src/store/store.js'
import { bigMetadata } from '../../events/feed-fixtures.js'
import { createMemoryLogger, makeTempDir } from '../../helpers/service.js'
import { changeUser, makeUser } from '../../helpers/store-users.js'

/**
 * A clock at the epoch gives no floor to the ids (idFloor): the ids after a restart then come
 * from what the log holds alone, the rule these tests are about. (With the real clock, a start
 * numbers above its clock's floor, far past every id here.)
 */
const NO_FLOOR = { now: () => 0 }

async function allEvents(
  store: Store,
): Promise<{ id: string; type: string; userId: string; version: number; actor?: string }[]> {
  const page = await store.events?.read({ limit: 1000 })
  return [...(page?.items ?? [])]
}

/** A closed store whose one user has four events (versions 1 to 4), and its segment's lines. */
async function fourEvents(t: TestContext) {
  const dataDir = await makeTempDir(t)
  const store = new FileStore({ ...NO_FLOOR, dataDir })
  await store.open()
  const user = (await store.create(makeUser())).user
  for (const name of ['Two', 'Three', 'Four'])
    await store.update(user.id, (current) => changeUser(current.user, { name }))
  await store.close()
  const eventsDir = path.join(dataDir, 'events')
  const [segment] = await readdir(eventsDir)
  assert.ok(segment !== undefined)
  const file = path.join(eventsDir, segment)
  return { dataDir, user, file, lines: (await readFile(file, 'utf8')).split('\n') }
}

/** The store opened again, what it logs, and the ids and reasons of the records it quarantined. */
async function reopen(t: TestContext, dataDir: string) {
  const logs: Record<string, unknown>[] = []
  const again = new FileStore({ ...NO_FLOOR, dataDir, logger: createMemoryLogger(logs) })
  await again.open()
  t.after(() => again.close())
  const quarantined = () =>
    logs
      .filter((line) => line['msg'] === 'quarantined a damaged event record')
      .map((line) => [line['id'], line['reason']])
  return { again, logs, quarantined }
}

describe('the event log of the file store', () => {
  it('cuts a torn last line at open and keeps every whole event', async (t) => {
    const dataDir = await makeTempDir(t)
    const store = new FileStore({ ...NO_FLOOR, dataDir })
    await store.open()
    const user = (await store.create(makeUser())).user
    await store.update(user.id, (current) => changeUser(current.user, { name: 'Renamed' }))
    await store.close()
    const eventsDir = path.join(dataDir, 'events')
    const [segment] = await readdir(eventsDir)
    assert.ok(segment !== undefined)
    const file = path.join(eventsDir, segment)
    const whole = await readFile(file, 'utf8')
    await appendFile(file, '{"id":"00000000000000ff","type":"user.upd')
    const again = new FileStore({ ...NO_FLOOR, dataDir })
    await again.open()
    t.after(() => again.close())
    assert.deepEqual(
      (await allEvents(again)).map((event) => [event.type, event.version]),
      [
        ['user.created', 1],
        ['user.updated', 2],
      ],
    )
    assert.equal(await readFile(file, 'utf8'), whole, 'the torn line is gone from the file')
    // Ids go on after the highest one: none is reused.
    await again.update(user.id, (current) => changeUser(current.user, { name: 'Again' }))
    const ids = (await allEvents(again)).map((event) => event.id)
    assert.deepEqual(ids, ['0000000000000001', '0000000000000002', '0000000000000003'])
  })

  it('voids, durably, an event at or behind the checkpoint whose change is not in users/, and never gives its id again', async (t) => {
    const dataDir = await makeTempDir(t)
    const store = new FileStore({ ...NO_FLOOR, dataDir })
    await store.open()
    const user = (await store.create(makeUser())).user
    await store.close()
    const eventsDir = path.join(dataDir, 'events')
    const [segment] = await readdir(eventsDir)
    assert.ok(segment !== undefined)
    // A change whose file step failed and whose void could not be written (the store turned
    // read-only), and a checkpoint moved past it: an event for version 2 only.
    const ghost = {
      id: '0000000000000002',
      type: 'user.updated',
      time: new Date().toISOString(),
      userId: user.id,
      version: 2,
      changed: ['name'],
      user: { ...user, version: 2 },
    }
    await appendFile(path.join(eventsDir, segment), `${JSON.stringify(ghost)}\n`)
    await writeFile(path.join(dataDir, 'checkpoint.json'), '{"through":"0000000000000002"}\n')
    const second = new FileStore({ ...NO_FLOOR, dataDir })
    await second.open()
    assert.deepEqual(
      (await allEvents(second)).map((event) => event.version),
      [1],
    )
    const next = await second.update(user.id, (current) =>
      changeUser(current.user, { name: 'Real' }),
    )
    assert.equal(next.user.version, 2)
    await second.close()
    const third = new FileStore({ ...NO_FLOOR, dataDir })
    await third.open()
    t.after(() => third.close())
    const events = await allEvents(third)
    assert.deepEqual(
      events.map((event) => [event.id, event.version]),
      [
        ['0000000000000001', 1],
        ['0000000000000003', 2],
      ],
    )
    const text = (
      await Promise.all(
        (await readdir(eventsDir)).map((name) => readFile(path.join(eventsDir, name), 'utf8')),
      )
    ).join('')
    assert.match(text, /\{"void":"0000000000000002"\}/)
  })
})

describe("the file store's feed on disk", () => {
  it('reads event bodies from the segments, not from memory (beyond a small cache of the newest)', async (t) => {
    const dataDir = await makeTempDir(t)
    const store = new FileStore({ dataDir })
    await store.open()
    t.after(() => store.close())
    const user = (await store.create(makeUser({ name: 'Original', metadata: bigMetadata('d') })))
      .user
    // About 2 MB of events: more than the cache of the newest bodies holds.
    for (let i = 0; i < 40; i += 1) {
      await store.update(user.id, (current) =>
        changeUser(current.user, { metadata: { ...current.user.metadata, k01: `v${i}` } }),
      )
    }
    const eventsDir = path.join(dataDir, 'events')
    const [segment] = await readdir(eventsDir)
    assert.ok(segment !== undefined)
    const file = path.join(eventsDir, segment)
    const bytes = await readFile(file)
    const at = bytes.indexOf('"name":"Original"')
    assert.ok(at > 0 && at < bytes.indexOf(0x0a))
    // The same number of bytes, changed where only the first event has them.
    bytes.write('"name":"Replaced"', at)
    await writeFile(file, bytes)
    const first = await store.events.read({ limit: 1 })
    assert.match(first.items[0]?.userJson ?? '', /"name":"Replaced"/)
  })

  it('quarantines records that are not UTF-8, not JSON or not an event, keeps every other one, and gives no damaged id again', async (t) => {
    const { dataDir, user, file, lines } = await fourEvents(t)
    // Event 2 no longer an event, a line of garbage after it, and the last event (4) not UTF-8.
    lines[1] = (lines[1] ?? '').replace('"type":"user.updated"', '"type":"user.renamed"')
    lines.splice(2, 0, 'not json at all')
    const text = Buffer.from(lines.join('\n'))
    const last = text.lastIndexOf('"name":"Four"')
    text[last + 9] = 0xc0
    await writeFile(file, text)
    const { again, logs, quarantined } = await reopen(t, dataDir)
    assert.deepEqual(
      (await allEvents(again)).map((event) => event.id),
      ['0000000000000001', '0000000000000003'],
    )
    assert.deepEqual(quarantined(), [
      ['0000000000000002', 'the record is not an event'],
      [undefined, 'the record is not an event'],
      ['0000000000000004', 'the record is not valid UTF-8'],
    ])
    assert.equal((await readdir(path.join(dataDir, 'quarantine'))).length, 3)
    assert.deepEqual(
      logs.find((line) => line['msg'] === 'events loaded'),
      { level: 'info', msg: 'events loaded', events: 2, voided: 0, heldBack: 0, damaged: 3 },
    )
    // The user is at version 4, whose event is damaged: the next change is event 5, never 4 again.
    await again.update(user.id, (current) => changeUser(current.user, { name: 'Five' }))
    assert.deepEqual(
      (await allEvents(again)).map((event) => event.id),
      ['0000000000000001', '0000000000000003', '0000000000000005'],
    )
  })

  it('quarantines an event that does not begin as the log writes one, as the replay skips it', async (t) => {
    const { dataDir, user, file, lines } = await fourEvents(t)
    // JSON.parse reads both: event 2 with a space before its brace, and event 3 after an id of 9.
    lines[1] = ` ${lines[1] ?? ''}`
    lines[2] = (lines[2] ?? '').replace('{"id":', '{"id":"0000000000000009","id":')
    await writeFile(file, lines.join('\n'))
    const { again, quarantined } = await reopen(t, dataDir)
    assert.deepEqual(
      (await allEvents(again)).map((event) => event.id),
      ['0000000000000001', '0000000000000004'],
    )
    const reason = 'the record does not begin as the log writes an event'
    assert.deepEqual(quarantined(), [
      ['0000000000000002', reason],
      ['0000000000000009', reason],
    ])
    assert.equal((await readdir(path.join(dataDir, 'quarantine'))).length, 2)
    // The first id of a damaged line is never handed out again.
    await again.update(user.id, (current) => changeUser(current.user, { name: 'Five' }))
    assert.deepEqual(
      (await allEvents(again)).map((event) => event.id),
      ['0000000000000001', '0000000000000004', '000000000000000a'],
    )
  })

  it('quarantines an event whose user is not as the log writes it: missing, not an object, or on a deletion', async (t) => {
    const { dataDir, user, file, lines } = await fourEvents(t)
    const [, two = '', three = '', four = ''] = lines
    const at = (line: string): number => line.indexOf(',"user":')
    lines[1] = `${two.slice(0, at(two))}}`
    lines[2] = `${three.slice(0, at(three))},"user":5}`
    lines[3] = four.replace('"type":"user.updated"', '"type":"user.deleted"')
    await writeFile(file, lines.join('\n'))
    const { again, quarantined } = await reopen(t, dataDir)
    assert.deepEqual(
      (await allEvents(again)).map((event) => event.id),
      ['0000000000000001'],
    )
    const reason = 'the record is not an event'
    assert.deepEqual(quarantined(), [
      ['0000000000000002', reason],
      ['0000000000000003', reason],
      ['0000000000000004', reason],
    ])
    assert.equal((await again.get(user.id))?.user.name, 'Four', "the user's file is kept")
  })

  it("hands out ids past the newest segment's name, even when no event is in it", async (t) => {
    const dataDir = await makeTempDir(t)
    const store = new FileStore({ ...NO_FLOOR, dataDir })
    await store.open()
    await store.create(makeUser())
    await store.close()
    await writeFile(path.join(dataDir, 'events', '0000000000000040.ndjson'), '')
    const again = new FileStore({ ...NO_FLOOR, dataDir })
    await again.open()
    t.after(() => again.close())
    await again.create(makeUser())
    assert.deepEqual(
      (await allEvents(again)).map((event) => event.id),
      ['0000000000000001', '0000000000000040'],
    )
  })
})

describe('events of stores', () => {
  it('appends one user.created for a full user (an import keeps id, status, times and version)', async () => {
    const store = new MemoryStore()
    const user = makeUser({ status: 'active', version: 4 })
    await store.create(user, undefined, { actor: 'importer', requestId: 'imp-1' })
    const events = await allEvents(store)
    assert.equal(events.length, 1)
    assert.deepEqual(
      [events[0]?.type, events[0]?.version, events[0]?.userId, events[0]?.actor],
      ['user.created', 4, user.id, 'importer'],
    )
  })

  it('appends nothing for a change that returns the user as it is, or one that is refused', async () => {
    const store = new MemoryStore()
    const user = (await store.create(makeUser())).user
    await store.update(user.id, () => undefined)
    const refusal = new Error('refused')
    await assert.rejects(
      store.update(user.id, () => {
        throw refusal
      }),
      (error) => error === refusal,
    )
    await assert.rejects(
      store.delete(user.id, () => {
        throw refusal
      }),
      (error) => error === refusal,
    )
    assert.equal((await allEvents(store)).length, 1)
  })
})

describe('MAX_EVENT_STREAMS and EVENTS_RETENTION_DAYS', () => {
  it('default to 100 and 30 and take whole numbers in range', () => {
    const defaults = parseConfig({})
    assert.equal(defaults.maxEventStreams, 100)
    assert.equal(defaults.eventsRetentionDays, 30)
    const set = parseConfig({ MAX_EVENT_STREAMS: '5', EVENTS_RETENTION_DAYS: '7' })
    assert.equal(set.maxEventStreams, 5)
    assert.equal(set.eventsRetentionDays, 7)
    assert.throws(
      () => parseConfig({ MAX_EVENT_STREAMS: '0' }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message === 'MAX_EVENT_STREAMS must be between 1 and 100000, got 0',
    )
    assert.throws(
      () => parseConfig({ EVENTS_RETENTION_DAYS: 'month' }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message === 'EVENTS_RETENTION_DAYS must be a whole number, got "month"',
    )
  })
})
