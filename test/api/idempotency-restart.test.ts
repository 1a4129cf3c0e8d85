import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { type ChildOptions, type RunningChild, startChild } from '../helpers/child.js'
import { request, type TestResponse } from '../helpers/http.js'
import { uniqueEmail } from '../helpers/service.js'
import { type Later, makeWorld } from '../helpers/tmpfs-world.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()
const feedToken = makeToken({ scope: 'events:read' })
/** No checkpoint before a kill: what was not synced is found again from the log, or not at all. */
const NO_CHECKPOINT = { CHECKPOINT_MS: '3600000' }

async function start(options: ChildOptions, later: Later): Promise<RunningChild> {
  const child = await startChild(options)
  later(() => child.stop('SIGKILL'))
  return child
}

const keyed = (key: string): Record<string, string> => ({ 'idempotency-key': `"${key}"` })

async function events(url: string): Promise<string[]> {
  const res = await request('GET', `${url}/events?limit=1000`, { token: feedToken })
  assert.equal(res.status, 200, res.text)
  return res
    .json<{ items: { type: string; userId: string }[] }>()
    .items.map((event) => `${event.type} ${event.userId}`)
}

function assertReplayOf(replay: TestResponse, first: TestResponse): void {
  assert.equal(replay.status, first.status, replay.text)
  assert.equal(replay.text, first.text)
  assert.equal(replay.headers.get('idempotent-replayed'), 'true')
  for (const name of ['content-type', 'location', 'etag'])
    assert.equal(replay.headers.get(name), first.headers.get(name), name)
}

describe('Idempotency-Key on the file store across SIGKILL', () => {
  it('a success that changed nothing, and a DELETE, are replayed after a SIGKILL right after their answers', {
    timeout: 60_000,
  }, async (t) => {
    const { dataDir, later } = await makeWorld(t, 'idempotency-restart-')
    const child = await start({ dataDir, env: NO_CHECKPOINT }, later)
    const made = await request('POST', `${child.url}/users`, {
      token,
      json: { email: uniqueEmail('alone'), name: 'Kept Alone' },
    })
    assert.equal(made.status, 201, made.text)
    const user = made.json<User>()
    const gone = await request('POST', `${child.url}/users`, {
      token,
      json: { email: uniqueEmail('gone'), name: 'Deleted' },
    })
    assert.equal(gone.status, 201, gone.text)
    const goneId = gone.json<User>().id
    // An empty PATCH changes nothing: its key is written alone, durably, before the 200.
    const unchanged = await request('PATCH', `${child.url}/users/${user.id}`, {
      token,
      json: {},
      headers: keyed('empty-patch'),
    })
    assert.equal(unchanged.status, 200, unchanged.text)
    const deleted = await request('DELETE', `${child.url}/users/${goneId}`, {
      token,
      headers: keyed('delete-once'),
    })
    assert.equal(deleted.status, 204, deleted.text)
    const before = await events(child.url)
    await child.stop('SIGKILL')

    const restarted = await start({ dataDir }, later)
    const patched = await request('PATCH', `${restarted.url}/users/${user.id}`, {
      token,
      json: {},
      headers: keyed('empty-patch'),
    })
    assertReplayOf(patched, unchanged)
    const again = await request('DELETE', `${restarted.url}/users/${goneId}`, {
      token,
      headers: keyed('delete-once'),
    })
    assertReplayOf(again, deleted)
    // Without its key the same DELETE would be a 404: the replay ran nothing.
    assert.deepEqual(await events(restarted.url), before, 'no event added by the replays')
    assert.equal(before.filter((event) => event.startsWith('user.deleted')).length, 1)
  })
})
