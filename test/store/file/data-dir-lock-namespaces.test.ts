import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs'
import { readdir, readFile, stat, utimes, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { pathToFileURL } from 'node:url'

import { DataDirLock } from '../../../src/store/file/data-dir-lock.js'
import { BEAT_WAIT_MS, beat, WATCH_PREFIX } from '../../../src/store/file/lock-namespace.js'
import {
  type Child,
  PROJECT_ROOT,
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

/** A process that watches a lock file for `waitMs` as a start does, and says what it saw. */
function watcher(
  file: string,
  waitMs: number,
): { started: Promise<void>; beating: Promise<boolean> } {
  const module = pathToFileURL(path.join(PROJECT_ROOT, 'src/store/file/lock-namespace.ts')).href
  const code = `import { isBeating } from ${JSON.stringify(module)}
process.stdout.write('watching\\n')
process.stdout.write(isBeating(process.argv[1], Number(process.argv[2])) + '\\n')`
  const args = ['--import', 'tsx', '--input-type=module', '-e', code, file, String(waitMs)]
  const proc = spawn(process.execPath, args, { cwd: PROJECT_ROOT })
  let out = ''
  let started = (): void => undefined
  const watching = new Promise<void>((resolve) => {
    started = resolve
  })
  proc.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString()
    if (out.includes('watching\n')) started()
  })
  const beating = new Promise<boolean>((resolve, reject) => {
    proc.on('exit', (code) => {
      started() // a watcher that failed early: its failure is told below
      const answer = /watching\n(true|false)\n$/.exec(out)?.[1]
      if (code === 0 && answer !== undefined) resolve(answer === 'true')
      else reject(new Error(`the watcher failed (${code}): ${out}`))
    })
  })
  return { started: watching, beating }
}

/** The watch files in a data directory. */
async function watches(dataDir: string): Promise<string[]> {
  return (await readdir(dataDir)).filter((name) => name.startsWith('.lock-watch'))
}

/** A lock file held open, as its owner holds it; beats are given by the test. */
async function heldFile(t: TestContext): Promise<{ dataDir: string; file: string; fd: number }> {
  const dataDir = await makeTempDir(t)
  const file = path.join(dataDir, '.lock.1')
  await writeFile(file, '1 fdfdfdfe0000000100000000000000000\n')
  const fd = openSync(file, 'r')
  t.after(() => closeSync(fd))
  return { dataDir, file, fd }
}

describe('the lock heartbeat', () => {
  it('touches the lock file only while a watcher asks', async (t) => {
    const dataDir = await makeTempDir(t)
    const lock = new DataDirLock(dataDir)
    lock.acquire()
    t.after(() => lock.release())
    const modified = async (): Promise<bigint> => (await stat(lock.file, { bigint: true })).mtimeNs
    const idle = await modified()
    await sleep(2500)
    assert.equal(await modified(), idle, 'nobody asks: no write at all')

    const asking = watcher(lock.file, 3000)
    assert.equal(await asking.beating, true)
    const after = await modified()
    assert.notEqual(after, idle)
    assert.deepEqual(await watches(dataDir), [], 'a watcher removes what it put there')
    await sleep(2500)
    assert.equal(await modified(), after, 'no touch once the watcher is gone')
  })

  it('answers a watcher for as long as it watches, whatever another one does meanwhile', async (t) => {
    const { dataDir, file, fd } = await heldFile(t)
    const seen = new Map<string, number>()
    // Two starts on one volume at once: the first ends while the second still watches.
    const first = watcher(file, 4000)
    await first.started
    await waitFor('the first watch', async () =>
      (await watches(dataDir)).length > 0 ? true : undefined,
    )
    const second = watcher(file, 12_000)
    await second.started
    await sleep(300)
    await first.beating
    // The owner's first beat after the first watcher left: the second still asks.
    beat(dataDir, fd, seen)
    assert.equal(await second.beating, true, 'a live owner was taken for dead')
  })

  it('answers a watch whatever time the file system stamped on it', async (t) => {
    const { dataDir, file, fd } = await heldFile(t)
    const asking = watcher(file, 6000)
    await asking.started
    await waitFor('the watch', async () => ((await watches(dataDir)).length > 0 ? true : undefined))
    // A file server (or a host) whose clock is a minute behind the owner's.
    const behind = new Date(Date.now() - 60_000)
    for (const name of await watches(dataDir))
      await utimes(path.join(dataDir, name), behind, behind)
    beat(dataDir, fd, new Map())
    assert.equal(await asking.beating, true, 'the owner dropped a fresh watch for an old one')
  })

  it('drops a watch left by a killed watcher after 12 s of its own clock, unanswered', async (t) => {
    const { dataDir, file, fd } = await heldFile(t)
    const modified = async (): Promise<bigint> => (await stat(file, { bigint: true })).mtimeNs
    const left = path.join(dataDir, `${WATCH_PREFIX}0123456789abcdef`)
    await writeFile(left, '')
    const seen = new Map<string, number>()
    const before = await modified()
    beat(dataDir, fd, seen, 1000)
    const answered = await modified()
    assert.notEqual(answered, before, 'answered while it may be a live watcher')
    beat(dataDir, fd, seen, 1000 + 4 * BEAT_WAIT_MS + 1)
    assert.equal(existsSync(left), false, 'removed once its watcher cannot be watching any more')
    assert.equal(await modified(), answered, 'and not answered')
    assert.equal(seen.size, 0)
  })
})
