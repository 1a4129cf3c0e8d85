import assert from 'node:assert/strict'
import { appendFile, readdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import { makeTempDir, startService } from '../helpers/service.js'
import { type FeedPage, feedReader } from './feed-fixtures.js'

const ID_2 = '{"id":"0000000000000002"'
/** What a crash in the middle of appending event 4 (never acknowledged) leaves. */
const TORN = '{"id":"0000000000000004","type":"user.upd'

describe('a damaged event log on the file store', () => {
  it('quarantines and logs a record with a bad byte, cuts a torn last line at its byte offset, and loses no acknowledged event nor reuses an id across two restarts', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'damaged-log-'), 'data')
    const patch = { contentType: 'application/merge-patch+json' }
    // Names and metadata outside ASCII: characters and bytes differ, as offsets would.
    const first = await startService(t, { dataDir })
    const user = await first.createUser({ name: 'Zoë Ünal', metadata: { city: 'Zürich €' } })
    for (const name of ['Zoë Ü. Two', 'Zoë Ü. Three']) {
      assert.equal(
        (await first.call('PATCH', `/users/${user.id}`, { ...patch, json: { name } })).status,
        200,
      )
    }
    const before = (await first.call('GET', '/events', { token: feedReader })).json<FeedPage>()
    assert.deepEqual(
      before.items.map((event) => event.id),
      ['0000000000000001', '0000000000000002', '0000000000000003'],
    )
    await first.service.close()

    const eventsDir = path.join(dataDir, 'events')
    const [segment] = await readdir(eventsDir)
    assert.ok(segment !== undefined)
    const file = path.join(eventsDir, segment)
    const whole = await readFile(file)
    // One 0xff byte inside event 2's user (an old line), and a torn last line after event 3.
    const start = whole.indexOf(ID_2)
    const at = whole.indexOf('Two', start)
    assert.ok(start > 0 && at > start)
    const damaged = Buffer.from(whole)
    damaged[at] = 0xff
    await writeFile(file, damaged)
    await appendFile(file, TORN)
    const damagedLine = damaged.subarray(start, damaged.indexOf(0x0a, start))

    const second = await startService(t, { dataDir })
    const afterFirst = (await second.call('GET', '/events', { token: feedReader })).json<FeedPage>()
    assert.deepEqual(
      afterFirst.items.map((event) => event.id),
      ['0000000000000001', '0000000000000003'],
    )
    assert.deepEqual(
      (await readFile(file)).subarray(0, damaged.length),
      damaged,
      'the torn line is cut at its first byte, nothing else',
    )
    assert.equal((await readFile(file)).length, damaged.length)
    const quarantined = await readdir(path.join(dataDir, 'quarantine'))
    assert.equal(quarantined.length, 1, String(quarantined))
    assert.deepEqual(
      await readFile(path.join(dataDir, 'quarantine', quarantined[0] ?? '')),
      Buffer.concat([damagedLine, Buffer.from('\n')]),
    )
    const logged = second.logs.find((line) => line['msg'] === 'quarantined a damaged event record')
    assert.ok(logged !== undefined, JSON.stringify(second.logs))
    assert.equal(logged['level'], 'warn')
    assert.equal(logged['file'], file)
    assert.equal(logged['offset'], start)
    assert.equal(logged['id'], '0000000000000002')
    assert.match(String(logged['reason']), /UTF-8/)
    // The one write: acknowledged event 4.
    assert.equal(
      (await second.call('PATCH', `/users/${user.id}`, { ...patch, json: { name: 'Zoë Ü. Four' } }))
        .status,
      200,
    )
    const written = (
      await second.call('GET', '/events?after=0000000000000003', { token: feedReader })
    ).json<FeedPage>()
    assert.deepEqual(
      written.items.map((event) => [event.id, event.version]),
      [['0000000000000004', 4]],
    )
    await second.service.close()

    const third = await startService(t, { dataDir })
    const res = await third.call('GET', '/events', { token: feedReader })
    assert.doesNotMatch(res.text, /\uFFFD/, 'no event is served with a replacement character')
    const afterSecond = res.json<FeedPage>()
    assert.deepEqual(
      afterSecond.items.map((event) => [event.id, event.version, event.user?.['name']]),
      [
        ['0000000000000001', 1, 'Zoë Ünal'],
        ['0000000000000003', 3, 'Zoë Ü. Three'],
        ['0000000000000004', 4, 'Zoë Ü. Four'],
      ],
      'acknowledged event 4 is still served',
    )
    assert.equal(
      (await third.call('PATCH', `/users/${user.id}`, { ...patch, json: { name: 'Zoë Ü. Five' } }))
        .status,
      200,
    )
    const last = (
      await third.call('GET', '/events?after=0000000000000004', { token: feedReader })
    ).json<FeedPage>()
    assert.deepEqual(
      last.items.map((event) => [event.id, event.version]),
      [['0000000000000005', 5]],
      'id 4 is not handed out again',
    )
    // Quarantined once; the record stays where it was, and each start says it is left out.
    assert.equal((await readdir(path.join(dataDir, 'quarantine'))).length, 1)
    assert.ok(
      third.logs.some(
        (line) =>
          line['msg'] === 'quarantined a damaged event record' && line['id'] === '0000000000000002',
      ),
    )
  })
})
