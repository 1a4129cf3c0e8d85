import assert from 'node:assert/strict'
import { cp, rm } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { type FeedPage, feedReader } from '../events/feed-fixtures.js'
import { type RunningChild, startChild } from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/**
 * The restore an operator makes after losing a disk: the data directory put back from a backup
 * older than what consumers of the feed and webhook receivers have already seen. Its new events
 * must not take the ids of the events lost with the disk: a consumer resuming from its saved
 * cursor would skip them, and a receiver would drop them as repeats of a `webhook-id` it has.
 */

const token = makeToken()

async function feed(url: string, after?: string): Promise<FeedPage> {
  const query = after === undefined ? '' : `&after=${after}`
  const res = await request('GET', `${url}/events?limit=1000${query}`, { token: feedReader })
  assert.equal(res.status, 200, res.text)
  return res.json<FeedPage>()
}

async function createUser(url: string): Promise<User> {
  const res = await request('POST', `${url}/users`, {
    token,
    json: { email: uniqueEmail('restore'), name: 'Restored' },
  })
  assert.equal(res.status, 201, res.text)
  return res.json<User>()
}

describe('a data directory put back from an older backup', () => {
  it('numbers its new events above every id handed out before the restore: none is reused, and a saved cursor sees them', {
    timeout: 60_000,
  }, async (t) => {
    const root = await makeTempDir(t, 'restore-older-')
    const dataDir = path.join(root, 'data')
    const backup = path.join(root, 'backup')
    const running = new Set<RunningChild>()
    t.after(() => Promise.all([...running].map((child) => child.stop('SIGKILL'))))
    const start = async (): Promise<RunningChild> => {
      const child = await startChild({ dataDir })
      running.add(child)
      return child
    }

    let child = await start()
    const kept = await createUser(child.url)
    await child.stop()
    await cp(dataDir, backup, { recursive: true, preserveTimestamps: true })

    // After the backup: a change a consumer reads, then the disk is lost.
    child = await start()
    const lost = await createUser(child.url)
    const seen = await feed(child.url)
    assert.deepEqual(
      seen.items.map((item) => [item.type, item.userId]),
      [
        ['user.created', kept.id],
        ['user.created', lost.id],
      ],
    )
    await child.stop()
    await rm(dataDir, { recursive: true })
    await cp(backup, dataDir, { recursive: true, preserveTimestamps: true })

    child = await start()
    const made = await createUser(child.url)
    const resumed = await feed(child.url, seen.nextCursor)
    assert.deepEqual(
      resumed.items.map((item) => [item.type, item.userId]),
      [['user.created', made.id]],
      'the consumer resuming from its saved cursor sees the event written after the restore',
    )
    const [fresh] = resumed.items
    assert.ok(fresh !== undefined)
    for (const old of seen.items) assert.ok(fresh.id > old.id, `${fresh.id} above ${old.id}`)
    const whole = await feed(child.url)
    assert.deepEqual(
      whole.items.map((item) => [item.id, item.userId]),
      [
        [seen.items[0]?.id, kept.id],
        [fresh.id, made.id],
      ],
      'the backup keeps its event and its id; the lost one is gone',
    )
  })
})
