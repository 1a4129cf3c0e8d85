import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFile, stat, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { DataDirLock, LockError } from '../../src/store/data-dir-lock.js'
import { startChild, spawnService, type RunningChild } from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { makeTempDir } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/** A lock on a fresh temp directory, released when the test ends. */
async function newLock(t: TestContext): Promise<DataDirLock> {
  const lock = new DataDirLock(await makeTempDir(t, 'data-dir-lock-test-'))
  t.after(() => { lock.release() })
  return lock
}

/** The pid of a child that stays alive until the test ends. */
function livePid(t: TestContext): number {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' })
  t.after(() => { child.kill('SIGKILL') })
  if (child.pid === undefined) throw new Error('could not spawn a child')
  return child.pid
}

/** The pid of a child that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
  const pid = child.pid
  if (pid === undefined) throw new Error('could not spawn a child')
  await new Promise((resolve) => child.on('exit', resolve))
  return pid
}

const readLock = (lock: DataDirLock): Promise<string> => readFile(lock.file, 'utf8')

describe('DataDirLock', () => {
  it('writes its pid to DATA_DIR/.lock with mode 0600', async (t) => {
    const lock = await newLock(t)
    lock.acquire()
    assert.equal(lock.held, true)
    assert.equal(path.basename(lock.file), '.lock')
    assert.equal(await readLock(lock), `${process.pid}\n`)
    assert.equal((await stat(lock.file)).mode & 0o777, 0o600)
  })

  it('treats a second acquire from the same lock as a no-op', async (t) => {
    const lock = await newLock(t)
    lock.acquire()
    // A second acquire must not look at the file again: it would find its own pid and rewrite it.
    await writeFile(lock.file, 'marker')
    lock.acquire()
    assert.equal(lock.held, true)
    assert.equal(await readLock(lock), 'marker')
  })

  it('refuses with a LockError naming the pid when a live process holds the lock', async (t) => {
    const lock = await newLock(t)
    const pid = livePid(t)
    await writeFile(lock.file, `${pid}\n`)
    assert.throws(() => { lock.acquire() }, (error: unknown) => {
      assert.ok(error instanceof LockError)
      assert.equal(error.name, 'LockError')
      assert.match(error.message, /in use/)
      assert.ok(error.message.includes(String(pid)), error.message)
      assert.ok(error.message.includes(lock.file), error.message)
      return true
    })
    assert.equal(lock.held, false)
    assert.equal(await readLock(lock), `${pid}\n`)
    // Releasing a lock never taken leaves the other process's file alone.
    lock.release()
    assert.equal(await readLock(lock), `${pid}\n`)
  })

  it('takes over the lock of a process that has exited', async (t) => {
    const lock = await newLock(t)
    await writeFile(lock.file, `${await deadPid()}\n`)
    lock.acquire()
    assert.equal(lock.held, true)
    assert.equal(await readLock(lock), `${process.pid}\n`)
  })

  const unusable = [['garbage', 'not a pid\n'], ['an empty file', ''], ['pid 0', '0\n'], ['a negative pid', '-5\n']] as const
  for (const [label, content] of unusable) {
    it(`takes over a lock file holding ${label}`, async (t) => {
      const lock = await newLock(t)
      await writeFile(lock.file, content)
      lock.acquire()
      assert.equal(lock.held, true)
      assert.equal(await readLock(lock), `${process.pid}\n`)
    })
  }

  it('takes over a lock file holding its own pid (a restarted container is pid 1 again)', async (t) => {
    const lock = await newLock(t)
    await writeFile(lock.file, `${process.pid}\n`)
    lock.acquire()
    assert.equal(lock.held, true)
    assert.equal(await readLock(lock), `${process.pid}\n`)
  })

  it('removes the file on release, and can take it again', async (t) => {
    const lock = await newLock(t)
    lock.acquire()
    lock.release()
    assert.equal(lock.held, false)
    await assert.rejects(stat(lock.file), { code: 'ENOENT' })
    lock.acquire()
    assert.equal(await readLock(lock), `${process.pid}\n`)
  })

  it('leaves the file on release when it no longer holds its pid', async (t) => {
    const lock = await newLock(t)
    lock.acquire()
    const other = livePid(t)
    await writeFile(lock.file, `${other}\n`)
    lock.release()
    assert.equal(lock.held, false)
    assert.equal(await readLock(lock), `${other}\n`)
  })

  it('lets another lock on the same directory take over once released', async (t) => {
    const dir = await makeTempDir(t, 'data-dir-lock-test-')
    const first = new DataDirLock(dir)
    const second = new DataDirLock(dir)
    first.acquire()
    first.release()
    second.acquire()
    t.after(() => { second.release() })
    assert.equal(second.held, true)
    assert.equal(await readFile(path.join(dir, '.lock'), 'utf8'), `${process.pid}\n`)
  })
})

describe('one service per data directory', () => {
  /** Starts the service as a child on `dataDir`, killed when the test ends. */
  async function startOwned(t: TestContext, dataDir: string): Promise<RunningChild> {
    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    return child
  }

  const createUser = async (url: string, email: string): Promise<{ status: number, id: string }> => {
    const res = await request('POST', `${url}/users`, { token: makeToken(), json: { email, name: 'Lock Test' } })
    return { status: res.status, id: res.json<{ id: string }>().id }
  }

  it('refuses a second process on the same DATA_DIR, keeps the first, and takes over after SIGKILL', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'data-dir-lock-test-'), 'data')
    const first = await startOwned(t, dataDir)
    const lockFile = path.join(dataDir, '.lock')
    assert.equal(await readFile(lockFile, 'utf8'), `${first.proc.pid}\n`)
    const created = await createUser(first.url, 'owner@example.com')
    assert.equal(created.status, 201)

    const second = spawnService({ dataDir })
    t.after(() => { second.proc.kill('SIGKILL') })
    const exit = await second.exited
    assert.notEqual(exit.code, 0)
    assert.equal(exit.signal, null)
    assert.doesNotMatch(second.stdout(), /"msg":"listening"/)
    assert.match(second.stderr(), /in use|lock/i)
    assert.ok(second.stderr().includes(String(first.proc.pid)), second.stderr())

    assert.equal((await request('GET', `${first.url}/readyz`)).status, 200)
    assert.equal((await createUser(first.url, 'after-refusal@example.com')).status, 201)
    assert.equal(await readFile(lockFile, 'utf8'), `${first.proc.pid}\n`)

    first.proc.kill('SIGKILL')
    await first.exited
    // The stale lock of the dead process is still there, and the next start takes it over.
    assert.equal(await readFile(lockFile, 'utf8'), `${first.proc.pid}\n`)
    const third = await startOwned(t, dataDir)
    assert.equal(await readFile(lockFile, 'utf8'), `${third.proc.pid}\n`)
    const res = await request('GET', `${third.url}/users/${created.id}`, { token: makeToken() })
    assert.equal(res.status, 200)
  })

  it('releases the lock when stopped with SIGTERM', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'data-dir-lock-test-'), 'data')
    const child = await startOwned(t, dataDir)
    const exit = await child.stop('SIGTERM')
    assert.equal(exit.code, 0)
    await assert.rejects(stat(path.join(dataDir, '.lock')), { code: 'ENOENT' })
  })
})
