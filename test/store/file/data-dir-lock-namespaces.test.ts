import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { readFile, stat, utimes, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { DataDirLock } from '../../../src/store/file/data-dir-lock.js'
import { WATCH_FILE } from '../../../src/store/file/lock-namespace.js'
import {
  type Child,
  type RunningChild,
  sleep,
  spawnService,
  startChild,
} from '../../helpers/child.js'
import { request } from '../../helpers/http.js'
import { waitFor } from '../../helpers/ops.js'
import { makeTempDir } from '../../helpers/service.js'
import { makeToken } from '../../helpers/tokens.js'

/*
 * Two containers on one volume: each service runs as pid 1 of a PID namespace of its own
 * (`unshare --pid --mount-proc`), where the other's pid means nothing and /proc shows none of its
 * files. The lock must still let exactly one of them write.
 */

/** Runs node as pid 1 of a new PID namespace; the child dies with unshare (SIGKILL included). */
const UNSHARE = ['unshare', '--pid', '--fork', '--mount-proc', '--kill-child=SIGKILL']
const canUnshare = spawnSync(UNSHARE[0] ?? '', [...UNSHARE.slice(1), 'true']).status === 0
const skip = !canUnshare && 'unshare cannot make a PID namespace here (it needs root)'
const TOKEN = makeToken()

/** The pid, in our namespace, of the node process unshare started. */
function nodePid(child: Child): number {
  const pid = child.proc.pid
  assert.ok(pid !== undefined)
  const tasks = path.join('/proc', String(pid), 'task', String(pid), 'children')
  const found = Number(readFileSync(tasks, 'utf8').trim().split(' ')[0])
  assert.ok(found > 0, `unshare ${pid} has no child`)
  return found
}

function startContained(t: TestContext, dataDir: string): Promise<RunningChild> {
  return startChild({ dataDir, wrapper: UNSHARE }, 30_000).then((child) => {
    t.after(() => child.stop('SIGKILL'))
    return child
  })
}

async function createUser(url: string, email: string): Promise<string> {
  const res = await request('POST', `${url}/users`, { token: TOKEN, json: { email, name: 'N' } })
  assert.equal(res.status, 201, res.text)
  return new URL(String(res.headers.get('location')), url).href
}

describe('the data directory lock across PID namespaces', { skip }, () => {
  it('refuses a second service of another namespace while the first runs, and the first keeps writing', async (t) => {
    const dataDir = await makeTempDir(t)
    const first = await startContained(t, dataDir)
    const lockFile = path.join(dataDir, '.lock.1')
    const held = await readFile(lockFile, 'utf8')
    assert.match(held, /^1 fdfdfdfe[0-9a-f]{24}\n$/, 'pid 1 of its namespace, which it names')

    const second = spawnService({ dataDir, wrapper: UNSHARE })
    t.after(() => second.proc.kill('SIGKILL'))
    const timer = setTimeout(() => second.proc.kill('SIGKILL'), 30_000)
    const exit = await second.exited
    clearTimeout(timer)
    assert.equal(exit.code, 1, `the second started:\n${second.stdout()}\n${second.stderr()}`)
    assert.match(
      second.stdout() + second.stderr(),
      /in use by a running process of another PID namespace \(another container; pid 1 there\)/,
    )
    assert.equal(await readFile(lockFile, 'utf8'), held, 'the lock is still the first one')
    // The first was never taken for lost: it still writes (it turns read-only within a second
    // of losing its lock).
    await sleep(1500)
    const location = await createUser(first.url, 'still@example.com')
    const read = await request('GET', location, { token: TOKEN })
    assert.equal(read.status, 200)
  })

  it('takes over the lock of a service of another namespace that was killed', async (t) => {
    const dataDir = await makeTempDir(t)
    const first = await startContained(t, dataDir)
    const location = await createUser(first.url, 'kept@example.com')
    const pid = nodePid(first)
    await first.stop('SIGKILL')
    while (existsSync(path.join('/proc', String(pid)))) await sleep(20)
    assert.ok(existsSync(path.join(dataDir, '.lock.1')), 'a killed service leaves its lock behind')

    const second = await startContained(t, dataDir)
    assert.match(await readFile(path.join(dataDir, '.lock.2'), 'utf8'), /^1 fdfdfdfe/)
    assert.equal(existsSync(path.join(dataDir, '.lock.1')), false, 'the stale lock is removed')
    const read = await request('GET', location.replace(first.url, second.url), { token: TOKEN })
    assert.equal(read.status, 200)
    assert.match(await createUser(second.url, 'new@example.com'), /\/users\/[0-9a-f-]{36}$/)
  })
})

describe('the lock heartbeat', () => {
  it('touches the lock file only while a watcher asks, and drops a watch left behind', async (t) => {
    const dataDir = await makeTempDir(t)
    const lock = new DataDirLock(dataDir)
    lock.acquire()
    t.after(() => lock.release())
    const modified = async (): Promise<bigint> => (await stat(lock.file, { bigint: true })).mtimeNs
    const idle = await modified()
    await sleep(2500)
    assert.equal(await modified(), idle, 'nobody asks: no write at all')

    const watch = path.join(dataDir, WATCH_FILE)
    await writeFile(watch, '')
    await waitFor('a touch while watched', async () =>
      (await modified()) !== idle ? true : undefined,
    )

    // A watcher killed while it watched: its file, a minute old, is removed, not answered.
    const old = new Date(Date.now() - 60_000)
    await utimes(watch, old, old)
    await waitFor('the old watch removed', () => (existsSync(watch) ? undefined : true))
    const after = await modified()
    await sleep(2500)
    assert.equal(await modified(), after, 'no touch once the watch is gone')
  })
})
