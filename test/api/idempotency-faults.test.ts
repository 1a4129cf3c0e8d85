import assert from 'node:assert/strict'
import { rmSync, writeFileSync } from 'node:fs'
import { constants } from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { type ChildOptions, type RunningChild, startChild } from '../helpers/child.js'
import { assertProblem, request, type TestResponse, type UserPage } from '../helpers/http.js'
import { uniqueEmail } from '../helpers/service.js'
import { compileShim, shimEnv } from '../helpers/syscall-shim.js'
import { type Later, makeWorld } from '../helpers/tmpfs-world.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()
const shim = compileShim()
const KEY = '"retry-after-an-unknown-outcome"'

async function start(options: ChildOptions, later: Later): Promise<RunningChild> {
  const child = await startChild(options)
  later(() => child.stop('SIGKILL'))
  return child
}

function post(url: string, json: unknown): Promise<TestResponse> {
  return request('POST', `${url}/users`, { token, json, headers: { 'idempotency-key': KEY } })
}

async function usersWithEmail(url: string, email: string): Promise<User[]> {
  const res = await request('GET', `${url}/users?email=${encodeURIComponent(email)}`, { token })
  assert.equal(res.status, 200, res.text)
  return res.json<UserPage>().items
}

describe('Idempotency-Key across faults of the file store', () => {
  it('a write answered 503 with outcome unknown, retried with its key after a restart, is made exactly once', {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const { root, dataDir, later } = await makeWorld(t, 'idempotency-faults-')
    const marker = path.join(root, 'fail-fsync')
    const env = shimEnv(shim.library, {
      failMarker: marker,
      failKind: 'file',
      failErrno: constants.errno.EIO,
      failUnder: path.join(dataDir, 'events'),
    })
    const child = await start({ dataDir, env: { ...env, CHECKPOINT_MS: '3600000' } }, later)
    const json = { email: uniqueEmail('unknown'), name: 'Maybe' }
    writeFileSync(marker, '')
    const refused = await post(child.url, json)
    const problem = assertProblem(refused, 503, 'storage_unavailable')
    assert.equal(problem.outcome, 'unknown', refused.text)
    rmSync(marker)
    await child.stop('SIGKILL')

    const restarted = await start({ dataDir }, later)
    const retried = await post(restarted.url, json)
    assert.equal(retried.status, 201, retried.text)
    const again = await post(restarted.url, json)
    assert.equal(again.status, 201, again.text)
    assert.equal(again.headers.get('idempotent-replayed'), 'true')
    assert.equal(again.text, retried.text)
    const users = await usersWithEmail(restarted.url, json.email)
    assert.equal(users.length, 1, 'one user, whichever outcome the first attempt had')
    assert.equal(users[0]?.id, retried.json<User>().id)
  })

  it('SIGKILL right after a 201: the retry with its key after the restart replays it, no second user', {
    timeout: 60_000,
  }, async (t) => {
    const { dataDir, later } = await makeWorld(t, 'idempotency-kill-')
    // No checkpoint before the kill: the key is found again from the log's replay.
    const child = await start({ dataDir, env: { CHECKPOINT_MS: '3600000' } }, later)
    const json = { email: uniqueEmail('killed'), name: 'Once' }
    const first = await post(child.url, json)
    assert.equal(first.status, 201, first.text)
    await child.stop('SIGKILL')

    const restarted = await start({ dataDir }, later)
    const retried = await post(restarted.url, json)
    assert.equal(retried.status, 201, retried.text)
    assert.equal(retried.headers.get('idempotent-replayed'), 'true')
    assert.equal(retried.text, first.text)
    assert.equal(retried.headers.get('location'), first.headers.get('location'))
    assert.equal((await usersWithEmail(restarted.url, json.email)).length, 1)
    const events = await request('GET', `${restarted.url}/events?limit=1000`, {
      token: makeToken({ scope: 'events:read' }),
    })
    assert.equal(events.json<{ items: unknown[] }>().items.length, 1)
  })
})
