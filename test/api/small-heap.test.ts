import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'

import type { User } from '../../src/domain/user.js'
import {
  LOADED_LINE,
  PROJECT_ROOT,
  type RunningChild,
  sleep,
  startChild,
  waitForOutput,
} from '../helpers/child.js'
import { request, type UserPage } from '../helpers/http.js'
import { makeUser, toContractJson } from '../helpers/store-users.js'
import { makeToken } from '../helpers/tokens.js'

const run = promisify(execFile)

const USERS = 10_000
/**
 * The "Constrained machines" table of docs/embedding.md measured 16 MiB as the smallest old-space heap that
 * loads and serves 10,000 users (Node 20, one-file bundle); this is that × 1.5, so that a change
 * which makes loading need half as much memory again fails here.
 */
const HEAP_MIB = 24

/** Writes `count` users straight in the file store's format: much faster than POSTing them. */
function fillUsers(dataDir: string, count: number): User[] {
  const usersDir = path.join(dataDir, 'users')
  mkdirSync(usersDir, { recursive: true, mode: 0o700 })
  const users: User[] = []
  for (let n = 0; n < count; n += 1) {
    const user = makeUser({
      email: `heap${n}@example.com`,
      status: 'active',
      metadata: { team: `t${n % 50}` },
    })
    writeFileSync(path.join(usersDir, `${user.id}.json`), toContractJson(user), { mode: 0o600 })
    users.push(user)
  }
  return users
}

describe('a heap cap for 10,000 users', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'small-heap-'))
  const dataDir = path.join(dir, 'data')
  const bundle = path.join(dir, 'user-service.mjs')
  const token = makeToken()
  let users: User[] = []
  let child: RunningChild | undefined

  before(async () => {
    // The one-file form: what runs in the container, and no tsx compiling inside the capped heap.
    await run(process.execPath, [path.join(PROJECT_ROOT, 'scripts', 'build-bundle.mjs'), bundle], {
      cwd: PROJECT_ROOT,
      timeout: 60_000,
    })
    users = fillUsers(dataDir, USERS)
    child = await startChild(
      {
        dataDir,
        args: [`--max-old-space-size=${HEAP_MIB}`, bundle],
        cwd: dir,
        // Coverage and inherited options would add to the heap; the service gets only the cap.
        env: { NODE_V8_COVERAGE: undefined, NODE_OPTIONS: undefined, NODE_TEST_CONTEXT: undefined },
      },
      60_000,
    )
  })

  after(async () => {
    await child?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it(`loads every user and serves reads with --max-old-space-size=${HEAP_MIB}`, async () => {
    const running = child
    assert.ok(running)
    const metrics = await request('GET', `${running.url}/metrics`)
    assert.equal(metrics.status, 200)
    assert.match(metrics.text, new RegExp(`^user_service_users ${USERS}$`, 'm'))

    const page = await request('GET', `${running.url}/users?limit=100`, { token })
    assert.equal(page.status, 200, page.text)
    assert.equal(page.json<UserPage>().items.length, 100)
    assert.equal(typeof page.json<UserPage>().nextCursor, 'string')

    const last = users[users.length - 1]
    assert.ok(last)
    const one = await request('GET', `${running.url}/users/${last.id}`, { token })
    assert.equal(one.status, 200, one.text)
    assert.equal(one.headers.get('etag'), '"v1"')
    assert.deepEqual(one.body, JSON.parse(toContractJson(last)))
  })

  it('creates a user, stores its file, and stays up', async () => {
    const running = child
    assert.ok(running)
    const created = await request('POST', `${running.url}/users`, {
      token,
      json: { email: 'capped@example.com', name: 'Capped' },
    })
    assert.equal(created.status, 201, created.text)
    const id = created.json<User>().id
    assert.ok(readdirSync(path.join(dataDir, 'users')).includes(`${id}.json`))

    const found = await request('GET', `${running.url}/users?email=capped@example.com`, { token })
    assert.equal(found.status, 200, found.text)
    assert.deepEqual(
      found.json<UserPage>().items.map((user) => user.id),
      [id],
    )

    // A heap too small would die in a later collection rather than in the request that filled it.
    await sleep(1000)
    assert.equal((await request('GET', `${running.url}/readyz`)).status, 200)
    assert.equal(running.proc.exitCode, null, running.stderr())
    assert.deepEqual(await running.stop(), { code: 0, signal: null })
    // The clean stop wrote every user into the snapshot inside the cap (a chunk at a time).
    assert.match(running.stdout(), /"msg":"users snapshot written"/)
    assert.ok(readdirSync(dataDir).includes('snapshot'))
  })

  it('starts again from the snapshot within the same cap, serves every user, and stops with exit 0', async () => {
    const again = await startChild(
      {
        dataDir,
        args: [`--max-old-space-size=${HEAP_MIB}`, bundle],
        cwd: dir,
        env: { NODE_V8_COVERAGE: undefined, NODE_OPTIONS: undefined, NODE_TEST_CONTEXT: undefined },
      },
      60_000,
    )
    child = again
    await waitForOutput(again, LOADED_LINE)
    assert.match(again.stdout(), /"msg":"users loaded","users":10001,[^\n]*"source":"snapshot"/)
    const last = users.at(-1)
    assert.ok(last)
    assert.equal((await request('GET', `${again.url}/users/${last.id}`, { token })).status, 200)
    const found = await request('GET', `${again.url}/users?email=capped@example.com`, { token })
    assert.equal(found.json<UserPage>().items.length, 1, found.text)
    await sleep(1000)
    assert.equal(again.proc.exitCode, null, again.stderr())
    assert.deepEqual(await again.stop(), { code: 0, signal: null })
  })
})
