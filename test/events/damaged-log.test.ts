import assert from 'node:assert/strict'
import { appendFile, readdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import { eventIdNumber, formatEventId } from '../../src/domain/event.js'
import { makeTempDir, startService } from '../helpers/service.js'
import { type FeedPage, feedReader } from './feed-fixtures.js'

/** The id `n` after `id`. */
function idAfter(id: string, n: number): string {
  return formatEventId(eventIdNumber(id) + n)
}

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
    const [id1 = '', id2 = '', id3 = ''] = before.items.map((event) => event.id)
    assert.deepEqual([id2, id3], [idAfter(id1, 1), idAfter(id1, 2)], 'consecutive ids')
    await first.service.close()
    const ID_2 = `{"id":"${id2}"`
    /** What a crash in the middle of appending event 4 (never acknowledged) leaves. */
    const TORN = `{"id":"${idAfter(id3, 1)}","type":"user.upd`

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
      [id1, id3],
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
    assert.equal(logged['id'], id2)
    assert.match(String(logged['reason']), /UTF-8/)
    // The one write: acknowledged event 4.
    assert.equal(
      (await second.call('PATCH', `/users/${user.id}`, { ...patch, json: { name: 'Zoë Ü. Four' } }))
        .status,
      200,
    )
    const written = (
      await second.call('GET', `/events?after=${id3}`, { token: feedReader })
    ).json<FeedPage>()
    assert.deepEqual(
      written.items.map((event) => event.version),
      [4],
    )
    const id4 = written.items[0]?.id ?? ''
    assert.ok(id4 > id3, id4)
    await second.service.close()

    const third = await startService(t, { dataDir })
    const res = await third.call('GET', '/events', { token: feedReader })
    assert.doesNotMatch(res.text, /\uFFFD/, 'no event is served with a replacement character')
    const afterSecond = res.json<FeedPage>()
    assert.deepEqual(
      afterSecond.items.map((event) => [event.id, event.version, event.user?.['name']]),
      [
        [id1, 1, 'Zoë Ünal'],
        [id3, 3, 'Zoë Ü. Three'],
        [id4, 4, 'Zoë Ü. Four'],
      ],
      'acknowledged event 4 is still served',
    )
    assert.equal(
      (await third.call('PATCH', `/users/${user.id}`, { ...patch, json: { name: 'Zoë Ü. Five' } }))
        .status,
      200,
    )
    const last = (
      await third.call('GET', `/events?after=${id4}`, { token: feedReader })
    ).json<FeedPage>()
    assert.deepEqual(
      last.items.map((event) => event.version),
      [5],
    )
    assert.ok((last.items[0]?.id ?? '') > id4, 'the id of event 4 is not handed out again')
    // Quarantined once; the record stays where it was, and each start says it is left out.
    assert.equal((await readdir(path.join(dataDir, 'quarantine'))).length, 1)
    assert.ok(
      third.logs.some(
        (line) => line['msg'] === 'quarantined a damaged event record' && line['id'] === id2,
      ),
    )
  })
})
