import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import pg from 'pg'

import type { User } from '../../../src/domain/user.js'
import { type RunningChild, startChild } from '../../helpers/child.js'
import { assertProblem, request, type TestResponse } from '../../helpers/http.js'
import { waitFor } from '../../helpers/pg-kept-keys.js'
import { freshDatabase, SKIP_POSTGRES, sql } from '../../helpers/postgres.js'
import { makeTempDir, uniqueEmail } from '../../helpers/service.js'
import { makeToken } from '../../helpers/tokens.js'

const admin = makeToken()
const KEY = '"3f1c9a52-7d1e-4d0b-9a57-5b8f5c2a9e11"'

/** Two service processes on one fresh database, each with a DATA_DIR of its own. */
async function twoReplicas(
  t: TestContext,
): Promise<{ a: RunningChild; b: RunningChild; url: string }> {
  const url = await freshDatabase(t)
  const root = await makeTempDir(t, 'key-replicas-')
  const replicas: RunningChild[] = []
  t.after(() => Promise.all(replicas.map((replica) => replica.stop('SIGKILL'))))
  for (const name of ['a', 'b'])
    replicas.push(
      await startChild({ dataDir: path.join(root, name), env: { DATABASE_URL: url } }, 30_000),
    )
  const [a, b] = replicas
  if (a === undefined || b === undefined) throw new Error('two replicas')
  return { a, b, url }
}

function patch(replica: RunningChild, id: string, name: string): Promise<TestResponse> {
  return request('PATCH', `${replica.url}/users/${id}`, {
    token: admin,
    json: { name },
    headers: { 'idempotency-key': KEY },
  })
}

/**
 * A user whose row a session of the test holds locked: a PATCH of it takes its key's hold, then
 * waits in its transaction, before its key is written, until the lock is let go.
 */
async function lockedUser(
  t: TestContext,
  replica: RunningChild,
  url: string,
): Promise<{ user: User; unlock: () => Promise<void> }> {
  const created = await request('POST', `${replica.url}/users`, {
    token: admin,
    json: { email: uniqueEmail(), name: 'Before' },
  })
  assert.equal(created.status, 201, created.text)
  const user = created.json<User>()
  const locker = new pg.Client({ connectionString: url })
  // The database's drop when the test ends may end this session first.
  locker.on('error', () => undefined)
  await locker.connect()
  t.after(() => locker.end())
  await locker.query('BEGIN')
  await locker.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [user.id])
  return {
    user,
    unlock: async () => {
      await locker.query('ROLLBACK')
    },
  }
}

async function holdTaken(url: string): Promise<void> {
  await waitFor('the first request to hold its key', async () => {
    const found = await sql('SELECT 1 FROM idempotency_keys WHERE status IS NULL', [], url)
    return found.rows.length === 1
  })
}

async function updatesOf(url: string, id: string): Promise<number> {
  const found = await sql(
    "SELECT count(*)::int AS n FROM events WHERE user_id = $1 AND type = 'user.updated'",
    [id],
    url,
  )
  return Number(found.rows[0]?.n)
}

describe('Idempotency-Key holds across PostgreSQL replicas (HTTP)', { skip: SKIP_POSTGRES }, () => {
  it('answers 409 at once on one replica while the other runs the request, then replays it', {
    timeout: 90_000,
  }, async (t) => {
    const { a, b, url } = await twoReplicas(t)
    const { user, unlock } = await lockedUser(t, a, url)
    const first = patch(a, user.id, 'First')
    await holdTaken(url)
    const started = Date.now()
    const refused = await patch(b, user.id, 'First')
    assertProblem(refused, 409, 'idempotency_key_in_use')
    assert.equal(refused.headers.get('retry-after'), '1')
    // Whatever its payload.
    assertProblem(await patch(b, user.id, 'Other'), 409, 'idempotency_key_in_use')
    assert.ok(Date.now() - started < 3000, `answered after ${Date.now() - started} ms`)
    await unlock()
    const done = await first
    assert.equal(done.status, 200, done.text)
    assert.equal(done.headers.get('idempotent-replayed'), null)
    const replay = await patch(b, user.id, 'First')
    assert.equal(replay.status, 200, replay.text)
    assert.equal(replay.headers.get('idempotent-replayed'), 'true')
    assert.equal(replay.text, done.text)
    assert.equal(replay.headers.get('etag'), done.headers.get('etag'))
    assert.equal(await updatesOf(url, user.id), 1)
  })

  it('frees the hold of a replica killed in the middle of a request within about 10 s, and the retry runs on the other', {
    timeout: 90_000,
  }, async (t) => {
    const { a, b, url } = await twoReplicas(t)
    const { user, unlock } = await lockedUser(t, a, url)
    void patch(a, user.id, 'Lost').catch(() => undefined)
    await holdTaken(url)
    await a.stop('SIGKILL')
    const killed = Date.now()
    await unlock()
    // The dead replica's hold outlives it until its lease ends.
    assertProblem(await patch(b, user.id, 'Retried'), 409, 'idempotency_key_in_use')
    let answer: TestResponse | undefined
    while (Date.now() - killed < 20_000) {
      const res = await patch(b, user.id, 'Retried')
      if (res.status !== 409) {
        answer = res
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    const freed = Date.now() - killed
    assert.equal(answer?.status, 200, answer?.text)
    assert.ok(freed < 12_000, `freed after ${freed} ms`)
    assert.equal(answer?.headers.get('idempotent-replayed'), null)
    assert.equal(answer?.json<User>().name, 'Retried')
    // The killed request changed nothing: one update, the retry's.
    assert.equal(await updatesOf(url, user.id), 1)
  })
})
