import assert from 'node:assert/strict'
import { type ChildProcess, fork, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import {
  chmod,
  mkdir,
  readdir,
  readFile,
  rename,
  stat,
  symlink,
  unlink,
  writeFile,
} from 'node:fs/promises'
import path from 'node:path'
import { after, before, describe, it, type TestContext } from 'node:test'

import { DataDirLock, LockError } from '../../../src/store/file/data-dir-lock.js'
import { HOLDER_MARK, holdsOpen } from '../../../src/store/file/lock-file.js'
import { namespacePrefix } from '../../../src/store/file/lock-namespace.js'
import { PROJECT_ROOT, type RunningChild, spawnService, startChild } from '../../helpers/child.js'
import { helperScript } from '../../helpers/child-scripts.js'
import { request } from '../../helpers/http.js'
import type { RacerAnswer, RacerCommand } from '../../helpers/lock-racer.js'
import { makeTempDir } from '../../helpers/service.js'
import { makeToken } from '../../helpers/tokens.js'

/**
 * What a lock file of this process holds: `<pid> <token>\n`, the token marked as held open and
 * naming our PID namespace.
 */
const OURS = new RegExp(`^${process.pid} ${namespacePrefix()}[0-9a-f]{16}\\n$`)

/** A lock file's content as another owner would have written it. */
const ownerLine = (pid: number, token = randomBytes(16).toString('hex')): string =>
  `${pid} ${token}\n`

/** The lock files and lock temp files in a directory, sorted. */
async function lockNames(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((name) => name.startsWith('.lock')).sort()
}

/** A fresh temp directory and a lock on it, released when the test ends. */
async function newLock(t: TestContext): Promise<{ dir: string; lock: DataDirLock }> {
  const dir = await makeTempDir(t, 'data-dir-lock-test-')
  const lock = new DataDirLock(dir)
  t.after(() => {
    lock.release()
  })
  return { dir, lock }
}

/** The pid of a child that stays alive until the test ends. */
function livePid(t: TestContext): number {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' })
  t.after(() => {
    child.kill('SIGKILL')
  })
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

/** Asserts that `run` throws a LockError whose message matches and names the file. */
function assertRefused(run: () => void, pattern: RegExp, file: string): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof LockError, String(error))
    assert.equal(error.name, 'LockError')
    assert.match(error.message, pattern)
    assert.ok(error.message.includes(file), `the message should name ${file}: ${error.message}`)
    return true
  })
}

const RACER = helperScript('lock-racer')

function racerEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env }
  delete env['NODE_TEST_CONTEXT']
  return env
}

/** A lock-racer in its single-round mode that has taken the lock on `dir`; it holds it until its stdin ends. */
async function startHolder(
  t: TestContext,
  dir: string,
): Promise<{ proc: ChildProcess; pid: number; file: string; exited: Promise<unknown> }> {
  const proc = spawn(process.execPath, [RACER, dir], {
    env: racerEnv(),
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  t.after(() => {
    proc.kill('SIGKILL')
  })
  const exited = new Promise((resolve) => proc.on('exit', resolve))
  let out = ''
  proc.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
  })
  await Promise.race([
    new Promise((resolve) =>
      proc.stdout.on('data', () => {
        if (out.includes('\n')) resolve(undefined)
      }),
    ),
    exited,
  ])
  const file = /^held (.+)\n/.exec(out)?.[1]
  assert.ok(
    file !== undefined && proc.pid !== undefined,
    `the holder did not take the lock: ${out}`,
  )
  return { proc, pid: proc.pid, file, exited }
}

describe('DataDirLock', () => {
  it('writes `<pid> <token>` to DATA_DIR/.lock.1 with mode 0600', async (t) => {
    const { dir, lock } = await newLock(t)
    assert.equal(lock.held, false)
    assert.equal(lock.file, path.join(dir, '.lock.<n>'), 'before acquire, the pattern of the names')
    lock.acquire()
    assert.equal(lock.held, true)
    assert.equal(lock.file, path.join(dir, '.lock.1'))
    assert.match(await readFile(lock.file, 'utf8'), OURS)
    assert.equal((await stat(lock.file)).mode & 0o777, 0o600)
    // The temp file it was written under is gone.
    assert.deepEqual(await lockNames(dir), ['.lock.1'])
  })

  it('treats a second acquire from the same lock as a no-op', async (t) => {
    const { dir, lock } = await newLock(t)
    lock.acquire()
    const content = await readFile(lock.file, 'utf8')
    lock.acquire()
    assert.equal(lock.held, true)
    assert.equal(lock.file, path.join(dir, '.lock.1'))
    assert.equal(await readFile(lock.file, 'utf8'), content)
    assert.deepEqual(await lockNames(dir), ['.lock.1'])
  })

  it('refuses with a LockError naming the pid and the file when a live process holds the lock', async (t) => {
    const { dir, lock } = await newLock(t)
    const pid = livePid(t)
    const file = path.join(dir, '.lock.1')
    await writeFile(file, ownerLine(pid))
    const content = await readFile(file, 'utf8')
    assertRefused(
      () => {
        lock.acquire()
      },
      new RegExp(
        `in use by another running process \\(pid ${pid}\\); lock file .*\\. Stop that process or point DATA_DIR elsewhere\\.$`,
      ),
      file,
    )
    assert.equal(lock.held, false)
    assert.equal(await readFile(file, 'utf8'), content)
    assert.deepEqual(await lockNames(dir), ['.lock.1'])
    // Releasing a lock never taken leaves the other process's file alone.
    assert.equal(lock.release(), false)
    assert.equal(await readFile(file, 'utf8'), content)
  })

  it('refuses while another process holds the lock, and takes it over once that process is killed', async (t) => {
    const { dir, lock } = await newLock(t)
    const holder = await startHolder(t, dir)
    assert.equal(holder.file, path.join(dir, '.lock.1'))
    const content = await readFile(holder.file, 'utf8')
    assert.match(content, new RegExp(`^${holder.pid} ${namespacePrefix()}[0-9a-f]{16}\\n$`))
    assertRefused(
      () => {
        lock.acquire()
      },
      new RegExp(`in use by another running process \\(pid ${holder.pid}\\)`),
      holder.file,
    )
    assert.equal(await readFile(holder.file, 'utf8'), content)

    holder.proc.kill('SIGKILL')
    await holder.exited
    assert.deepEqual(await lockNames(dir), ['.lock.1'], 'a killed holder leaves its lock behind')
    lock.acquire()
    assert.equal(lock.file, path.join(dir, '.lock.2'))
    assert.deepEqual(await lockNames(dir), ['.lock.2'])
  })

  it('holds its lock file open while it holds the lock, and closes it on release', {
    skip: !existsSync('/proc/self/fd') && 'no /proc/self/fd here',
  }, async (t) => {
    const { lock } = await newLock(t)
    lock.acquire()
    const { dev, ino } = await stat(lock.file, { bigint: true })
    assert.equal(holdsOpen(process.pid, `${dev}:${ino}`), true)
    assert.equal(lock.release(), true)
    assert.equal(holdsOpen(process.pid, `${dev}:${ino}`), false)
  })

  it('takes over a marked lock whose pid is now another program, which does not hold it (a reboot)', {
    skip: !existsSync('/proc/self/fd') && 'no /proc/self/fd here',
  }, async (t) => {
    const { dir, lock } = await newLock(t)
    // After a power cut the lock's pid may be any program's: alive, but not holding the file.
    const file = path.join(dir, '.lock.1')
    await writeFile(file, ownerLine(livePid(t), `${HOLDER_MARK}${randomBytes(12).toString('hex')}`))
    lock.acquire()
    assert.equal(lock.file, path.join(dir, '.lock.2'))
    assert.match(await readFile(lock.file, 'utf8'), OURS)
    assert.deepEqual(await lockNames(dir), ['.lock.2'])
  })

  it('judges an unmarked lock (an earlier release) by its pid alone', async (t) => {
    const { dir, lock } = await newLock(t)
    const pid = livePid(t)
    const file = path.join(dir, '.lock.1')
    await writeFile(
      file,
      ownerLine(pid, `0${HOLDER_MARK.slice(1)}${randomBytes(12).toString('hex')}`),
    )
    assertRefused(
      () => {
        lock.acquire()
      },
      new RegExp(`in use by another running process \\(pid ${pid}\\)`),
      file,
    )
  })

  it('counts an owner as holding its file where /proc cannot tell, and not once its folder is gone', () => {
    const missing = path.join(PROJECT_ROOT, 'no-such-proc')
    assert.equal(holdsOpen(process.pid, '1:1', missing), true, 'no /proc: never taken on a guess')
    assert.equal(holdsOpen(2 ** 31 - 2, '1:1'), !existsSync('/proc/self/fd'))
  })

  it('takes the lock once another process releases it', async (t) => {
    const { dir, lock } = await newLock(t)
    const holder = await startHolder(t, dir)
    holder.proc.stdin?.end()
    await holder.exited
    assert.deepEqual(await lockNames(dir), [])
    lock.acquire()
    assert.equal(lock.file, path.join(dir, '.lock.1'))
  })

  it('takes over the lock of a process that has exited with the next generation, removing the stale file', async (t) => {
    const { dir, lock } = await newLock(t)
    await writeFile(path.join(dir, '.lock.1'), ownerLine(await deadPid()))
    lock.acquire()
    assert.equal(lock.held, true)
    assert.equal(lock.file, path.join(dir, '.lock.2'))
    assert.match(await readFile(lock.file, 'utf8'), OURS)
    assert.deepEqual(await lockNames(dir), ['.lock.2'])
  })

  it('takes over after the highest of several stale generations and removes them all', async (t) => {
    const { dir, lock } = await newLock(t)
    for (const generation of [1, 3, 9]) {
      await writeFile(path.join(dir, `.lock.${generation}`), ownerLine(await deadPid()))
    }
    // A temp file left by a process killed while writing its lock file goes too.
    await writeFile(path.join(dir, `.lock-tmp.${randomBytes(16).toString('hex')}`), '')
    lock.acquire()
    assert.equal(lock.file, path.join(dir, '.lock.10'))
    assert.match(await readFile(lock.file, 'utf8'), OURS)
    assert.deepEqual(await lockNames(dir), ['.lock.10'])
  })

  it('takes over a lock holding its own pid with an unknown token (a restarted container is pid 1 again)', async (t) => {
    const { dir, lock } = await newLock(t)
    await writeFile(path.join(dir, '.lock.1'), ownerLine(process.pid))
    lock.acquire()
    assert.equal(lock.file, path.join(dir, '.lock.2'))
    assert.deepEqual(await lockNames(dir), ['.lock.2'])
  })

  // Lock files are linked into place fully written, so a file that does not read as `<pid>
  // <token>` (an empty one included) was not written by this service, or is being tampered with:
  // it may belong to someone, so it is never taken as stale.
  const unreadable = [
    ['garbage', 'not a lock\n'],
    ['nothing (an empty file)', ''],
    ['a pid without a token (the 0.1.0 format)', '4242\n'],
    ['pid 0', `0 ${randomBytes(16).toString('hex')}\n`],
    [
      'a live owner followed by more bytes',
      `${process.ppid} ${randomBytes(16).toString('hex')}\nmore\n`,
    ],
    ['a live owner after other bytes', `x${process.ppid} ${randomBytes(16).toString('hex')}\n`],
  ] as const
  for (const [label, content] of unreadable) {
    it(`refuses, and leaves alone, a lock file holding ${label}`, async (t) => {
      const { dir, lock } = await newLock(t)
      const file = path.join(dir, '.lock.1')
      await writeFile(file, content)
      assertRefused(
        () => {
          lock.acquire()
        },
        /was not written by this service.*remove it if no process uses this directory/,
        file,
      )
      assert.equal(lock.held, false)
      assert.equal(await readFile(file, 'utf8'), content)
      assert.deepEqual(await lockNames(dir), ['.lock.1'])
    })
  }

  it('refuses an unreadable lock file under a stale one, and removes the file it had linked', async (t) => {
    const { dir, lock } = await newLock(t)
    const garbage = path.join(dir, '.lock.1')
    await writeFile(garbage, 'garbage\n')
    await writeFile(path.join(dir, '.lock.2'), ownerLine(await deadPid()))
    assertRefused(
      () => {
        lock.acquire()
      },
      /was not written by this service/,
      garbage,
    )
    assert.equal(lock.held, false)
    assert.deepEqual(await lockNames(dir), ['.lock.1', '.lock.2'])
  })

  it('refuses a live lock under a stale one (a late process re-created an old generation)', async (t) => {
    const { dir, lock } = await newLock(t)
    const pid = livePid(t)
    const live = path.join(dir, '.lock.1')
    await writeFile(live, ownerLine(pid))
    await writeFile(path.join(dir, '.lock.2'), ownerLine(await deadPid()))
    assertRefused(
      () => {
        lock.acquire()
      },
      new RegExp(`\\(pid ${pid}\\)`),
      live,
    )
    assert.equal(lock.held, false)
    // It linked .lock.3 and gave it up when it saw the live owner of .lock.1.
    assert.deepEqual(await lockNames(dir), ['.lock.1', '.lock.2'])
  })

  it('names the current lock, the highest generation, when its owner lives, even above an unreadable one', async (t) => {
    const { dir, lock } = await newLock(t)
    await writeFile(path.join(dir, '.lock.1'), 'garbage\n')
    const pid = livePid(t)
    const current = path.join(dir, '.lock.2')
    await writeFile(current, ownerLine(pid))
    assertRefused(
      () => {
        lock.acquire()
      },
      new RegExp(`in use by another running process \\(pid ${pid}\\)`),
      current,
    )
    assert.deepEqual(await lockNames(dir), ['.lock.1', '.lock.2'])
  })

  it('writes nothing into the directory when the current lock refuses it', async (t) => {
    for (const content of [ownerLine(livePid(t)), 'garbage\n']) {
      const { dir, lock } = await newLock(t)
      await writeFile(path.join(dir, '.lock.1'), content)
      // Past the file system's clock tick, so that any file made and removed would move the mtime.
      await new Promise((resolve) => setTimeout(resolve, 30))
      const before = (await stat(dir, { bigint: true })).mtimeNs
      assert.throws(
        () => {
          lock.acquire()
        },
        { name: 'LockError' },
      )
      assert.equal((await stat(dir, { bigint: true })).mtimeNs, before, content)
    }
  })

  it('orders generations by number and leaves alone files that only look like lock files', async (t) => {
    const { dir, lock } = await newLock(t)
    const dead = await deadPid()
    for (const generation of [12, 5, 40, 3])
      await writeFile(path.join(dir, `.lock.${generation}`), ownerLine(dead))
    const strays = ['x.lock.90', '.lock.80.bak', '.lock.070', `.lock.${'1'.repeat(16)}`]
    for (const name of strays) await writeFile(path.join(dir, name), ownerLine(livePid(t)))
    lock.acquire()
    assert.equal(lock.file, path.join(dir, '.lock.41'))
    assert.deepEqual((await readdir(dir)).sort(), [...strays, '.lock.41'].sort())
  })

  it('gives up after a bounded number of tries when the current lock file keeps vanishing', async (t) => {
    const { dir, lock } = await newLock(t)
    // A dangling link reads as removed every time it is read, as if other processes kept taking it.
    await symlink(path.join(dir, 'nowhere'), path.join(dir, '.lock.1'))
    assertRefused(
      () => {
        lock.acquire()
      },
      /could not take the lock of the data directory .*: other processes keep taking it$/,
      dir,
    )
    assert.equal(lock.held, false)
    assert.deepEqual(await lockNames(dir), ['.lock.1'])
  })

  it('refuses a lock file it cannot read (a directory, a link to itself) as not written by this service', async (t) => {
    for (const make of [(file: string) => mkdir(file), (file: string) => symlink(file, file)]) {
      const { dir, lock } = await newLock(t)
      const file = path.join(dir, '.lock.1')
      await make(file)
      assertRefused(
        () => {
          lock.acquire()
        },
        /was not written by this service/,
        file,
      )
      assert.deepEqual(await lockNames(dir), ['.lock.1'])
    }
  })

  it('takes over past a lock file that vanished between the listing and the reading (a dangling link stands in)', async (t) => {
    const { dir, lock } = await newLock(t)
    await symlink(path.join(dir, 'nowhere'), path.join(dir, '.lock.1'))
    await writeFile(path.join(dir, '.lock.2'), ownerLine(await deadPid()))
    lock.acquire()
    assert.equal(lock.file, path.join(dir, '.lock.3'))
    assert.deepEqual(await lockNames(dir), ['.lock.3'])
  })

  it('counts a process of another user as live (kill answers EPERM)', async (t) => {
    const { dir } = await newLock(t)
    const file = path.join(dir, '.lock.1')
    if (process.getuid?.() === 0) {
      // As root every process answers kill(pid, 0): a racer run as nobody asks about this one.
      await writeFile(file, ownerLine(process.pid))
      await chmod(dir, 0o755)
      const racer = spawn(process.execPath, [RACER, dir], {
        env: racerEnv(),
        uid: 65534,
        gid: 65534,
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      t.after(() => {
        racer.kill('SIGKILL')
      })
      let out = ''
      racer.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk
      })
      racer.stderr.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk
      })
      await new Promise((resolve) => racer.on('exit', resolve))
      assert.match(
        out,
        new RegExp(`^refused: .*in use by another running process \\(pid ${process.pid}\\)`),
        out,
      )
    } else {
      try {
        process.kill(1, 0)
        t.skip('pid 1 belongs to this user here')
        return
      } catch (error) {
        if ((error as { code?: unknown }).code !== 'EPERM') throw error
      }
      await writeFile(file, ownerLine(1))
      assertRefused(
        () => {
          new DataDirLock(dir).acquire()
        },
        /in use by another running process \(pid 1\)/,
        file,
      )
    }
    assert.deepEqual(await lockNames(dir), ['.lock.1'])
  })

  it('closes every file it opens', {
    skip: !existsSync('/proc/self/fd') && 'no /proc/self/fd here',
  }, async (t) => {
    const { dir, lock } = await newLock(t)
    const openFds = async (): Promise<number> => (await readdir('/proc/self/fd')).length
    await writeFile(path.join(dir, '.lock'), `${await deadPid()}\n`)
    await writeFile(path.join(dir, '.lock.1'), ownerLine(await deadPid()))
    const before = await openFds()
    for (let i = 0; i < 10; i += 1) {
      lock.acquire()
      assert.equal(lock.check(), true)
      assert.equal(lock.release(), true)
    }
    assert.equal(await openFds(), before)
  })

  it('refuses a second lock in the same process on the same directory', async (t) => {
    const { dir, lock: first } = await newLock(t)
    first.acquire()
    const content = await readFile(first.file, 'utf8')
    const second = new DataDirLock(dir)
    t.after(() => {
      second.release()
    })
    assertRefused(
      () => {
        second.acquire()
      },
      new RegExp(`another store in this process \\(pid ${process.pid}\\)`),
      first.file,
    )
    assert.equal(second.held, false)
    assert.equal(second.check(), false)
    assert.equal(first.check(), true)
    assert.equal(await readFile(first.file, 'utf8'), content)
    assert.deepEqual(await lockNames(dir), ['.lock.1'])

    // Once the first lets go, the second takes it.
    assert.equal(first.release(), true)
    second.acquire()
    assert.equal(second.held, true)
    assert.equal(second.file, path.join(dir, '.lock.1'))
    assert.notEqual(await readFile(second.file, 'utf8'), content)
  })

  it('removes its file on release, and can take the lock again', async (t) => {
    const { dir, lock } = await newLock(t)
    lock.acquire()
    const content = await readFile(lock.file, 'utf8')
    assert.equal(lock.release(), true)
    assert.equal(lock.held, false)
    assert.equal(lock.file, path.join(dir, '.lock.1'), 'the file it held, for a log line')
    assert.deepEqual(await lockNames(dir), [])
    assert.equal(lock.release(), false)
    lock.acquire()
    assert.equal(lock.held, true)
    assert.match(await readFile(lock.file, 'utf8'), OURS)
    assert.notEqual(await readFile(lock.file, 'utf8'), content, 'a new acquire uses a new token')
  })

  it('leaves the file on release when it no longer holds its token', async (t) => {
    const { dir, lock } = await newLock(t)
    lock.acquire()
    const other = ownerLine(livePid(t))
    await writeFile(lock.file, other)
    assert.equal(lock.release(), false)
    assert.equal(lock.held, false)
    assert.equal(await readFile(path.join(dir, '.lock.1'), 'utf8'), other)
  })

  it('checks true while its file is in place, and false once it is removed', async (t) => {
    const { lock } = await newLock(t)
    assert.equal(lock.check(), false, 'not acquired yet')
    lock.acquire()
    assert.equal(lock.check(), true)
    assert.equal(lock.check(), true)
    await unlink(lock.file)
    assert.equal(lock.check(), false)
    assert.equal(lock.release(), false)
  })

  it('checks false once its file is replaced, even by a copy with the same content', async (t) => {
    const { dir, lock } = await newLock(t)
    lock.acquire()
    const copy = path.join(dir, 'copy')
    await writeFile(copy, await readFile(lock.file))
    await rename(copy, lock.file)
    assert.equal(lock.check(), false)
  })

  it('checks false once its file holds another token', async (t) => {
    const { lock } = await newLock(t)
    lock.acquire()
    await writeFile(lock.file, ownerLine(process.pid))
    assert.equal(lock.check(), false)
  })

  it('keeps checking true while a late starter links a lock file and gives it up', async (t) => {
    const { dir, lock } = await newLock(t)
    await writeFile(path.join(dir, '.lock.1'), ownerLine(await deadPid()))
    lock.acquire()
    assert.equal(lock.file, path.join(dir, '.lock.2'))
    // A starter that listed the directory before the takeover links the generation it aimed at
    // once its holder is gone, then sees the live lock and gives it up.
    const late = path.join(dir, '.lock.1')
    await writeFile(late, ownerLine(livePid(t)))
    assert.equal(lock.check(), true)
    await unlink(late)
    assert.equal(lock.check(), true)
  })

  it('checks false after release', async (t) => {
    const { lock } = await newLock(t)
    lock.acquire()
    lock.release()
    assert.equal(lock.check(), false)
  })

  it('refuses while the legacy .lock of version 0.1.0 names a live process, and leaves it', async (t) => {
    const { dir, lock } = await newLock(t)
    const pid = livePid(t)
    const legacy = path.join(dir, '.lock')
    await writeFile(legacy, `${pid}\n`)
    assertRefused(
      () => {
        lock.acquire()
      },
      new RegExp(`in use by another running process \\(pid ${pid}\\)`),
      legacy,
    )
    assert.equal(lock.held, false)
    assert.equal(await readFile(legacy, 'utf8'), `${pid}\n`)
    assert.deepEqual(await lockNames(dir), ['.lock'])
  })

  it('removes the legacy .lock of a process that has exited and takes the lock', async (t) => {
    const { dir, lock } = await newLock(t)
    await writeFile(path.join(dir, '.lock'), `${await deadPid()}\n`)
    lock.acquire()
    assert.equal(lock.file, path.join(dir, '.lock.1'))
    assert.deepEqual(await lockNames(dir), ['.lock.1'])
  })

  it('refuses a legacy .lock naming a live process without a newline', async (t) => {
    const { dir, lock } = await newLock(t)
    const pid = livePid(t)
    const legacy = path.join(dir, '.lock')
    await writeFile(legacy, String(pid))
    assertRefused(
      () => {
        lock.acquire()
      },
      new RegExp(`\\(pid ${pid}\\)`),
      legacy,
    )
    assert.deepEqual(await lockNames(dir), ['.lock'])
  })

  it('removes a legacy .lock it reads no pid from and takes the lock', async (t) => {
    const pid = livePid(t)
    for (const content of ['not a pid\n', `x${pid}\n`, `${pid}\nmore\n`, '']) {
      const { dir, lock } = await newLock(t)
      await writeFile(path.join(dir, '.lock'), content)
      lock.acquire()
      assert.equal(lock.file, path.join(dir, '.lock.1'), JSON.stringify(content))
      assert.deepEqual(await lockNames(dir), ['.lock.1'], JSON.stringify(content))
    }
  })

  it('removes a legacy .lock holding its own pid (an earlier run of a restarted container) and takes the lock', async (t) => {
    const { dir, lock } = await newLock(t)
    await writeFile(path.join(dir, '.lock'), `${process.pid}\n`)
    lock.acquire()
    assert.equal(lock.file, path.join(dir, '.lock.1'))
    assert.deepEqual(await lockNames(dir), ['.lock.1'])
  })
})

/** A lock-racer child process serving rounds over IPC. */
interface Racer {
  readonly pid: number
  ask(command: RacerCommand): Promise<RacerAnswer>
  kill(): void
}

/** Starts a racer and waits for it to be ready. */
async function startRacer(): Promise<Racer> {
  const proc: ChildProcess = fork(RACER, [], {
    execArgv: [],
    env: racerEnv(),
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  })
  let stderr = ''
  proc.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk
  })
  const next = (): Promise<RacerAnswer> =>
    new Promise((resolve, reject) => {
      const onExit = (code: number | null): void => {
        reject(new Error(`a racer exited (${code}):\n${stderr}`))
      }
      proc.once('exit', onExit)
      proc.once('message', (answer: RacerAnswer) => {
        proc.off('exit', onExit)
        resolve(answer)
      })
    })
  const ready = await next().catch((error: unknown) => {
    proc.kill('SIGKILL')
    throw error
  })
  assert.equal(ready.kind, 'ready')
  return {
    pid: ready.pid,
    ask(command) {
      const answer = next()
      proc.send(command)
      return answer
    },
    kill() {
      proc.kill('SIGKILL')
    },
  }
}

/**
 * Runs `rounds` rounds of all racers trying the lock at once, each on a new directory made by
 * `prepare`: exactly one takes it, as `expectedFile`, and the others are refused naming it.
 */
async function race(
  t: TestContext,
  racers: readonly Racer[],
  rounds: number,
  prepare: (dir: string) => Promise<void>,
  expectedFile: string,
): Promise<void> {
  const base = await makeTempDir(t, 'data-dir-lock-race-')
  for (let round = 0; round < rounds; round += 1) {
    const dir = path.join(base, `round-${round}`)
    await mkdir(dir)
    await prepare(dir)
    // Far enough ahead for every racer to have the message and be spinning when it comes.
    const at = Date.now() + 40
    const answers = await Promise.all(racers.map((racer) => racer.ask({ kind: 'go', dir, at })))
    const held = answers.filter((answer) => answer.kind === 'held')
    assert.equal(
      held.length,
      1,
      `round ${round}: ${held.length} holders: ${JSON.stringify(answers)}`,
    )
    const [winner] = held
    assert.ok(winner !== undefined)
    for (const answer of answers) {
      if (answer.kind !== 'refused') continue
      assert.equal(answer.name, 'LockError', answer.message)
      assert.ok(answer.message.includes(`(pid ${winner.pid})`), `round ${round}: ${answer.message}`)
    }
    // Only the winner's lock file is left: no stale generation, no loser's file or temp file.
    assert.equal(winner.file, path.join(dir, expectedFile))
    assert.deepEqual(await lockNames(dir), [expectedFile], `round ${round}`)
    assert.match(await readFile(winner.file, 'utf8'), new RegExp(`^${winner.pid} [0-9a-f]{32}\\n$`))

    const racer = racers.find((candidate) => candidate.pid === winner.pid)
    assert.ok(racer !== undefined)
    assert.deepEqual(await racer.ask({ kind: 'release' }), {
      kind: 'released',
      pid: winner.pid,
      removed: true,
    })
    assert.deepEqual(await lockNames(dir), [])
  }
}

describe('DataDirLock with many processes racing', { timeout: 120_000 }, () => {
  const ROUNDS = 30
  const racers: Racer[] = []
  before(async () => {
    const started = await Promise.allSettled(Array.from({ length: 8 }, startRacer))
    for (const result of started) if (result.status === 'fulfilled') racers.push(result.value)
    const failed = started.find((result) => result.status === 'rejected')
    if (failed !== undefined) throw failed.reason
  })
  after(() => {
    for (const racer of racers) racer.kill()
  })

  it('gives a fresh directory to exactly one of 8 processes, round after round', async (t) => {
    await race(t, racers, ROUNDS, async () => {}, '.lock.1')
  })

  it('gives a stale lock to exactly one of 8 processes, round after round', async (t) => {
    const dead = await deadPid()
    await race(
      t,
      racers,
      ROUNDS,
      async (dir) => {
        await writeFile(path.join(dir, '.lock.1'), ownerLine(dead))
      },
      '.lock.2',
    )
  })

  it('gives several stale generations and a stale legacy .lock to exactly one of 8 processes', async (t) => {
    const dead = await deadPid()
    await race(
      t,
      racers,
      ROUNDS,
      async (dir) => {
        await writeFile(path.join(dir, '.lock'), `${dead}\n`)
        for (const generation of [1, 2, 4])
          await writeFile(path.join(dir, `.lock.${generation}`), ownerLine(dead))
      },
      '.lock.5',
    )
  })
})

describe('one service per data directory', () => {
  /** Starts the service as a child on `dataDir`, killed when the test ends. */
  async function startOwned(t: TestContext, dataDir: string): Promise<RunningChild> {
    const child = await startChild({ dataDir }, 60_000)
    t.after(() => child.stop('SIGKILL'))
    return child
  }

  const createUser = async (
    url: string,
    email: string,
  ): Promise<{ status: number; id: string }> => {
    const res = await request('POST', `${url}/users`, {
      token: makeToken(),
      json: { email, name: 'Lock Test' },
    })
    return { status: res.status, id: res.json<{ id: string }>().id }
  }

  const lockOf = (pid: number | undefined): RegExp => new RegExp(`^${String(pid)} [0-9a-f]{32}\\n$`)

  it('refuses a second process on the same DATA_DIR, keeps the first, and takes over after SIGKILL', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'data-dir-lock-test-'), 'data')
    const first = await startOwned(t, dataDir)
    const firstLock = path.join(dataDir, '.lock.1')
    const firstContent = await readFile(firstLock, 'utf8')
    assert.match(firstContent, lockOf(first.proc.pid))
    const created = await createUser(first.url, 'owner@example.com')
    assert.equal(created.status, 201)

    const second = spawnService({ dataDir })
    t.after(() => {
      second.proc.kill('SIGKILL')
    })
    const exit = await second.exited
    assert.equal(exit.code, 1)
    assert.equal(exit.signal, null)
    assert.doesNotMatch(second.stdout(), /"msg":"listening"/)
    assert.match(
      second.stderr(),
      /cannot start: the data directory .* is already in use by another running process/,
    )
    assert.ok(second.stderr().includes(`(pid ${String(first.proc.pid)})`), second.stderr())
    assert.ok(second.stderr().includes(firstLock), second.stderr())

    // The first goes on, its lock untouched.
    assert.equal((await request('GET', `${first.url}/readyz`)).status, 200)
    assert.equal((await createUser(first.url, 'after-refusal@example.com')).status, 201)
    assert.equal(await readFile(firstLock, 'utf8'), firstContent)
    assert.deepEqual(await lockNames(dataDir), ['.lock.1'])

    first.proc.kill('SIGKILL')
    await first.exited
    // The stale lock of the dead process is still there, and the next start takes it over.
    assert.equal(await readFile(firstLock, 'utf8'), firstContent)
    const third = await startOwned(t, dataDir)
    assert.match(await readFile(path.join(dataDir, '.lock.2'), 'utf8'), lockOf(third.proc.pid))
    assert.deepEqual(await lockNames(dataDir), ['.lock.2'])
    const res = await request('GET', `${third.url}/users/${created.id}`, { token: makeToken() })
    assert.equal(res.status, 200)
    assert.equal(res.json<{ email: string }>().email, 'owner@example.com')
  })

  it('removes its lock file when stopped with SIGTERM', async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'data-dir-lock-test-'), 'data')
    const child = await startOwned(t, dataDir)
    assert.deepEqual(await lockNames(dataDir), ['.lock.1'])
    const exit = await child.stop('SIGTERM')
    assert.equal(exit.code, 0)
    assert.deepEqual(await lockNames(dataDir), [])
  })
})
