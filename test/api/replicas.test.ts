import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { type RunningChild, spawnService, startChild } from '../helpers/child.js'
import {
  assertProblem,
  type RequestOptions,
  request,
  type TestResponse,
  type UserPage,
} from '../helpers/http.js'
import { freshDatabase, SKIP_POSTGRES, sql } from '../helpers/postgres.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const admin = makeToken()

/** `count` service processes on one fresh database, each with a DATA_DIR of its own. */
async function startReplicas(
  t: TestContext,
  count: number,
  env: Record<string, string> = {},
): Promise<{ replicas: RunningChild[]; url: string }> {
  const url = await freshDatabase(t)
  const root = await makeTempDir(t, 'replicas-')
  const replicas: RunningChild[] = []
  // Registered before the database's own clean-up runs (after hooks run last first).
  t.after(() => Promise.all(replicas.map((replica) => replica.stop('SIGKILL'))))
  // One after another at first is not needed: they migrate under an advisory lock.
  const started = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      startChild(
        { dataDir: path.join(root, `data-${i}`), env: { DATABASE_URL: url, ...env } },
        30_000,
      ),
    ),
  )
  replicas.push(...started)
  return { replicas, url }
}

function call(
  replica: RunningChild,
  method: string,
  target: string,
  options: RequestOptions = {},
): Promise<TestResponse> {
  return request(method, `${replica.url}${target}`, { token: admin, ...options })
}

async function create(replica: RunningChild, fields: Record<string, unknown> = {}): Promise<User> {
  const res = await call(replica, 'POST', '/users', {
    json: { email: uniqueEmail(), name: 'Replica User', ...fields },
  })
  assert.equal(res.status, 201, res.text)
  return res.json<User>()
}

const pick = <T>(items: readonly T[], i: number): T => {
  const item = items[i % items.length]
  if (item === undefined) throw new Error('no replicas')
  return item
}

describe('replicas on one PostgreSQL database', { skip: SKIP_POSTGRES }, () => {
  it('gives exactly one 201 for same-email creates spread over three replicas, and 409 to the rest', {
    timeout: 90_000,
  }, async (t) => {
    const { replicas } = await startReplicas(t, 3)
    const email = uniqueEmail('same')
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        call(pick(replicas, i), 'POST', '/users', {
          json: { email: i % 2 === 0 ? email : email.toUpperCase(), name: `Racer ${i}` },
        }),
      ),
    )
    assert.deepEqual(
      answers.map((res) => res.status).filter((status) => status === 201),
      [201],
    )
    for (const res of answers) if (res.status !== 201) assertProblem(res, 409, 'duplicate_email')
    for (const replica of replicas) {
      const page = await call(replica, 'GET', `/users?email=${encodeURIComponent(email)}`)
      assert.equal(page.json<UserPage>().items.length, 1)
    }
  })

  it('lets exactly one of two writes with the same If-Match on two replicas win; the other is 412', {
    timeout: 90_000,
  }, async (t) => {
    const { replicas } = await startReplicas(t, 2)
    const [a, b] = replicas as [RunningChild, RunningChild]
    for (let round = 0; round < 5; round += 1) {
      const user = await create(a)
      const answers = await Promise.all(
        [a, b].map((replica, i) =>
          call(replica, 'PATCH', `/users/${user.id}`, {
            json: { name: `Winner ${i}` },
            contentType: 'application/merge-patch+json',
            headers: { 'if-match': '"v1"' },
          }),
        ),
      )
      const statuses = answers.map((res) => res.status).sort()
      assert.deepEqual(statuses, [200, 412], answers.map((res) => res.text).join('\n'))
      const winner = answers.find((res) => res.status === 200)?.json<User>()
      assertProblem(
        answers.find((res) => res.status === 412) ?? (answers[0] as TestResponse),
        412,
        'precondition_failed',
      )
      const stored = await call(b, 'GET', `/users/${user.id}`)
      assert.equal(stored.headers.get('etag'), '"v2"')
      assert.equal(stored.json<User>().name, winner?.name)
    }
  })

  it('accepts a cursor made by one replica on another, and the walk sees every user once', {
    timeout: 90_000,
  }, async (t) => {
    const { replicas } = await startReplicas(t, 2)
    const created: string[] = []
    for (let i = 0; i < 7; i += 1) created.push((await create(pick(replicas, i))).id)
    const seen: string[] = []
    let target = '/users?limit=2'
    for (let page = 0; ; page += 1) {
      const res = await call(pick(replicas, page), 'GET', target)
      assert.equal(res.status, 200, res.text)
      const body = res.json<UserPage>()
      seen.push(...body.items.map((user) => user.id))
      if (body.nextCursor === null) break
      target = `/users?limit=2&cursor=${body.nextCursor}`
    }
    assert.deepEqual(seen, [...created].sort())
  })

  it("refuses a suspended or deleted subject's token on another replica at its next request", {
    timeout: 90_000,
  }, async (t) => {
    const { replicas } = await startReplicas(t, 2)
    const [a, b] = replicas as [RunningChild, RunningChild]
    const user = await create(a)
    const own = makeToken({ sub: user.id })
    assert.equal((await call(b, 'GET', '/users', { token: own })).status, 200)
    assert.equal((await call(a, 'POST', `/users/${user.id}:activate`)).status, 200)
    assert.equal((await call(a, 'POST', `/users/${user.id}:suspend`)).status, 200)
    assertProblem(await call(b, 'GET', '/users', { token: own }), 403, 'subject_suspended')
    assert.equal((await call(b, 'POST', `/users/${user.id}:activate`)).status, 200)
    assert.equal((await call(a, 'GET', '/users', { token: own })).status, 200)
    assert.equal((await call(b, 'DELETE', `/users/${user.id}`)).status, 204)
    assertProblem(await call(a, 'GET', '/users', { token: own }), 403, 'subject_deleted')
    assertProblem(await call(a, 'GET', `/users/${user.id}`), 404, 'not_found')
  })

  it('loses no acknowledged write when one replica is killed with SIGKILL while writing', {
    timeout: 120_000,
  }, async (t) => {
    const { replicas, url } = await startReplicas(t, 2)
    const [victim, survivor] = replicas as [RunningChild, RunningChild]
    const acknowledged: string[] = []
    let stop = false
    const writers = Array.from({ length: 4 }, async () => {
      while (!stop) {
        const res = await call(victim, 'POST', '/users', {
          json: { email: uniqueEmail('kill'), name: 'Before the kill' },
        }).catch(() => undefined)
        if (res === undefined) return
        if (res.status === 201) acknowledged.push(res.json<User>().id)
      }
    })
    while (acknowledged.length < 40) await new Promise((resolve) => setTimeout(resolve, 10))
    await victim.stop('SIGKILL')
    stop = true
    await Promise.all(writers)
    for (const id of acknowledged) {
      const res = await call(survivor, 'GET', `/users/${id}`)
      assert.equal(res.status, 200, `acknowledged user ${id} is missing: ${res.text}`)
    }
    const rows = await sql('SELECT count(*)::int AS n FROM users', [], url)
    assert.ok((rows.rows[0] as { n: number }).n >= acknowledged.length)
    assert.equal(
      (await call(survivor, 'POST', '/users', { json: { email: uniqueEmail(), name: 'After' } }))
        .status,
      201,
    )
  })

  it('runs WORKERS=2 worker processes on one port, and stops them all on SIGTERM with exit 0', {
    timeout: 90_000,
  }, async (t) => {
    const url = await freshDatabase(t)
    const dataDir = path.join(await makeTempDir(t, 'workers-'), 'data')
    const primary = await startChild({ dataDir, env: { DATABASE_URL: url, WORKERS: '2' } }, 30_000)
    t.after(() => primary.stop('SIGKILL'))
    const user = await create(primary)
    assert.equal((await call(primary, 'GET', `/users/${user.id}`)).status, 200)
    const deadline = Date.now() + 20_000
    let pids = new Set<string>()
    while (pids.size < 2 && Date.now() < deadline) {
      pids = new Set(
        [...primary.stdout().matchAll(/"msg":"listening".*?"pid":(\d+)/g)].map(
          (match) => match[1] ?? '',
        ),
      )
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    assert.equal(pids.size, 2, primary.stdout())
    const urls = new Set(
      [...primary.stdout().matchAll(/"msg":"listening","url":"([^"]+)"/g)].map((match) => match[1]),
    )
    assert.equal(urls.size, 1, 'both workers listen on one port')
    const exit = await primary.stop('SIGTERM')
    assert.deepEqual(exit, { code: 0, signal: null })
  })
})

describe('WORKERS without PostgreSQL', () => {
  it('refuses to start more than one worker on the file store, naming why', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'workers-'), 'data')
    const child = spawnService({ dataDir, env: { WORKERS: '2' } })
    const exit = await child.exited
    assert.equal(exit.code, 1)
    assert.match(
      child.stderr(),
      /WORKERS=2 needs DATABASE_URL: the file store keeps users in one process's memory/,
    )
    assert.doesNotMatch(child.stdout(), /"msg":"listening"/)
  })

  it('refuses a DATABASE_URL that is not a postgres:// URL without echoing it', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'workers-'), 'data')
    const child = spawnService({ dataDir, env: { DATABASE_URL: 'mysql://user:hunter2@db/x' } })
    assert.equal((await child.exited).code, 1)
    assert.match(child.stderr(), /DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL/)
    assert.doesNotMatch(child.stderr(), /hunter2/)
  })
})
