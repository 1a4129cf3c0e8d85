import assert from 'node:assert/strict'
import { readdir, readFile, stat } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { FileStore } from '../../src/store/file/file-store.js'
import { type Child, sleep, spawnService, startChild } from '../helpers/child.js'
import { helperScript } from '../helpers/child-scripts.js'
import { request } from '../helpers/http.js'
import { createMemoryLogger, makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { isTornByKill } from '../helpers/wal-recovery.js'

const WRITER = helperScript('crash-writer')
const USER_FILE = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.json$/
const ACK = /^([0-9a-f-]{36}) (\d+)$/

const tempFiles = async (dir: string): Promise<string[]> =>
  (await readdir(dir)).filter((name) => name.endsWith('.tmp'))

/**
 * After how many acknowledged writes each round kills the writer: a fixed spread, from the very
 * first write to a store grown well past its first page, so that every run tests the same points.
 */
const KILL_AFTER_ACKS = [1, 17, 60, 5, 150] as const

/** How many creates the service has answered 201 for when the second test kills it. */
const KILL_AFTER_CREATES = 25

async function waitForReady(child: Child, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!child.stdout().startsWith('ready\n')) {
    if (child.proc.exitCode !== null || Date.now() > deadline) {
      throw new Error(`the crash writer did not start:\n${child.stderr()}\n${child.stdout()}`)
    }
    await sleep(10)
  }
}

/**
 * Sends SIGKILL as soon as the writer has printed `count` acknowledged writes (more may be printed
 * before the signal lands; each is a real acknowledgement all the same).
 */
function killAfterAcks(child: Child, count: number, timeoutMs = 60_000): Promise<void> {
  const stdout = child.proc.stdout
  if (stdout === null) throw new Error('the crash writer has no stdout')
  return new Promise((resolve, reject) => {
    const finish = (error?: Error): void => {
      clearTimeout(timer)
      stdout.off('data', check)
      child.proc.off('exit', exited)
      if (error === undefined) resolve()
      else reject(error)
    }
    // spawnService's own listener was added first, so child.stdout() already holds this chunk.
    const check = (): void => {
      if (readAcks(child.stdout()).length < count) return
      child.proc.kill('SIGKILL')
      finish()
    }
    const exited = (): void => {
      finish(new Error(`the crash writer stopped by itself:\n${child.stderr()}`))
    }
    const timer = setTimeout(() => {
      finish(new Error(`fewer than ${count} writes within ${timeoutMs} ms`))
    }, timeoutMs)
    stdout.on('data', check)
    child.proc.once('exit', exited)
    check()
  })
}

/** The `<id> <version>` lines the writer printed in full (a line cut by the kill is left out). */
function readAcks(stdout: string): [string, number][] {
  const lines = stdout.split('\n').slice(1, -1)
  return lines.map((line) => {
    const match = ACK.exec(line)
    if (match === null) throw new Error(`an unexpected line from the crash writer: ${line}`)
    return [match[1] ?? '', Number(match[2])]
  })
}

/** Every user file in users/ is whole JSON naming its own id; temp files may be anything. */
async function checkUserFiles(usersDir: string): Promise<number> {
  let count = 0
  for (const name of await readdir(usersDir)) {
    if (name.startsWith('.') && name.endsWith('.tmp')) continue
    const id = USER_FILE.exec(name)?.[1]
    assert.ok(id !== undefined, `an unexpected file in users/: ${name}`)
    const text = await readFile(path.join(usersDir, name), 'utf8')
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      assert.fail(`users/${name} is not whole JSON: ${text.slice(0, 200)}`)
    }
    assert.ok(typeof parsed === 'object' && parsed !== null, `users/${name} is not an object`)
    const user = parsed as Partial<Record<keyof User, unknown>>
    assert.equal(user.id, id)
    assert.ok(typeof user.version === 'number' && user.version >= 1, `users/${name} has no version`)
    count += 1
  }
  return count
}

describe('durability after SIGKILL', () => {
  const across =
    'keeps every acknowledged store write, with whole files and no quarantine, across five kills'
  it(across, { timeout: 300_000 }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'crash-test-'), 'data')
    const usersDir = path.join(dataDir, 'users')
    const acked = new Map<string, number>()
    for (const [index, killAfter] of KILL_AFTER_ACKS.entries()) {
      const round = index + 1
      const child = spawnService({
        dataDir,
        args: [WRITER, dataDir, String(round)],
      })
      t.after(() => {
        child.proc.kill('SIGKILL')
      })
      await waitForReady(child)
      await killAfterAcks(child, killAfter)
      const exit = await child.exited
      assert.equal(
        exit.signal,
        'SIGKILL',
        `round ${round}: the writer stopped by itself:\n${child.stderr()}`,
      )
      const acks = readAcks(child.stdout())
      assert.ok(
        acks.length >= killAfter,
        `round ${round}: ${acks.length} writes acknowledged, killed after ${killAfter}`,
      )
      for (const [id, version] of acks) acked.set(id, Math.max(version, acked.get(id) ?? 0))

      const files = await checkUserFiles(usersDir)
      assert.ok(
        files >= acked.size,
        `round ${round}: ${files} user files for ${acked.size} acknowledged users`,
      )

      const logs: Record<string, unknown>[] = []
      const store = new FileStore({ dataDir, logger: createMemoryLogger(logs) })
      await store.open()
      try {
        for (const [id, version] of acked) {
          const record = await store.get(id)
          assert.ok(record !== undefined, `round ${round}: acknowledged user ${id} is missing`)
          assert.ok(
            record.user.version >= version,
            `round ${round}: user ${id} is at version ${record.user.version}, acknowledged ${version}`,
          )
        }
      } finally {
        await store.close()
      }
      assert.deepEqual(
        logs.filter((line) => line['level'] === 'warn' && !isTornByKill(line)),
        [],
        `round ${round}: warnings at open`,
      )
      const quarantined = stat(path.join(dataDir, 'quarantine'))
      await assert.rejects(
        quarantined,
        { code: 'ENOENT' },
        `round ${round}: something was quarantined`,
      )
      assert.deepEqual(await tempFiles(usersDir), [], `round ${round}: temp files left after open`)
    }
  })

  it('keeps every user the service answered 201 for when it is SIGKILLed mid-stream', {
    timeout: 120_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'crash-test-'), 'data')
    const first = await startChild({ dataDir })
    t.after(() => first.stop('SIGKILL'))
    const token = makeToken()
    const acked: User[] = []
    let killed = false
    const post = async (): Promise<void> => {
      while (!killed) {
        try {
          const json = { email: uniqueEmail('crash'), name: 'Crash Test' }
          const res = await request('POST', `${first.url}/users`, { token, json })
          if (res.status !== 201) throw new Error(`POST /users: ${res.status} ${res.text}`)
          acked.push(res.json<User>())
          // Killed while the other posters still have creates in flight.
          if (acked.length >= KILL_AFTER_CREATES && !killed) {
            killed = true
            first.proc.kill('SIGKILL')
          }
        } catch (error) {
          // Requests cut by the kill fail; nothing was promised for them.
          if (!killed) throw error
        }
      }
    }
    await Promise.all(Array.from({ length: 4 }, post))
    assert.equal((await first.exited).signal, 'SIGKILL')
    assert.ok(acked.length >= KILL_AFTER_CREATES, `${acked.length} creates acknowledged`)

    const second = await startChild({ dataDir })
    t.after(() => second.stop('SIGKILL'))
    for (const user of acked) {
      const res = await request('GET', `${second.url}/users/${user.id}`, { token })
      assert.equal(res.status, 200, `acknowledged user ${user.id} is missing: ${res.text}`)
      assert.deepEqual(res.json<User>(), user)
    }
    assert.deepEqual(await tempFiles(path.join(dataDir, 'users')), [])
  })
})
