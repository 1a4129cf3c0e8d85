import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'

import { FileStore } from '../../src/store/file/file-store.js'
import { sleep } from '../helpers/child.js'
import { makeTempDir, startService, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const DAY_MS = 86_400_000
const FEED = makeToken({ scope: 'events:read' })

describe('the file store when the wall clock steps forward for a moment', () => {
  it('a step of 40 days undone a few seconds later prunes no event and forgets no kept key', {
    timeout: 60_000,
  }, async (t) => {
    // The wall clock itself is moved (as an NTP step or an operator's wrong date would), not an
    // injected `now`: the service and the store read Date.now.
    const realNow = Date.now
    let offsetMs = 0
    Date.now = () => realNow() + offsetMs
    t.after(() => {
      Date.now = realNow
    })
    const dataDir = path.join(await makeTempDir(t), 'data')
    const start = () =>
      startService(t, { store: new FileStore({ dataDir, keySweepMs: 100, watchIntervalMs: 100 }) })
    const first = await start()
    const body = { email: uniqueEmail('kept'), name: 'Kept' }
    const headers = { 'idempotency-key': '"clock-step"' }
    const created = await first.call('POST', '/users', { json: body, headers })
    assert.equal(created.status, 201, created.text)
    await first.createUser()
    await sleep(500)

    offsetMs = 40 * DAY_MS
    // A write while the clock is wrong starts a new segment of the feed (the old one looks old).
    await first.call('POST', '/users', {
      json: { email: uniqueEmail('ahead'), name: 'Ahead' },
      token: makeToken(),
    })
    await sleep(1500)
    offsetMs = 0
    await first.service.close()

    const second = await start()
    const replayed = await second.call('POST', '/users', { json: body, headers })
    assert.equal(replayed.status, 201, replayed.text)
    assert.equal(replayed.headers.get('idempotent-replayed'), 'true')
    const feed = await second.call('GET', '/events?after=0000000000000000', { token: FEED })
    assert.equal(feed.status, 200, feed.text)
    assert.equal(feed.json<{ items: unknown[] }>().items.length, 3)
  })
})
