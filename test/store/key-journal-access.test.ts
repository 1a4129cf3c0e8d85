import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { chmod, chown, readdir } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import {
  type ChildOptions,
  type RunningChild,
  sleep,
  spawnService,
  startChild,
  waitForOutput,
} from '../helpers/child.js'
import { serviceScript } from '../helpers/child-scripts.js'
import { assertProblem, request, type UserPage } from '../helpers/http.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()
/** nobody and nogroup: a user whose reads a file's mode can refuse. */
const NOBODY = { uid: 65534, gid: 65534 }

/**
 * Who the service runs as: itself when the tests do not run as root (modes bind it already),
 * nobody when they do; undefined when nobody cannot be had here or cannot run the service.
 */
function serviceUser(): ChildOptions['user'] | 'self' | undefined {
  if (process.getuid?.() !== 0) return 'self'
  const code = 'for (const file of process.argv.slice(1)) require("node:fs").readFileSync(file)'
  const needs = [serviceScript()]
  const probe = spawnSync(process.execPath, ['-e', code, ...needs], {
    uid: NOBODY.uid,
    gid: NOBODY.gid,
    stdio: 'ignore',
  })
  // Not even a process of nobody's, or one that may not read the service's code.
  if (probe.error !== undefined || probe.status !== 0) return undefined
  return NOBODY
}

/** A data directory the service's user owns, in a temporary directory it may enter. */
async function dataDirFor(t: TestContext, user: ChildOptions['user']): Promise<string> {
  const dir = await makeTempDir(t, 'key-journal-access-')
  if (user !== undefined) await chown(dir, user.uid, user.gid)
  return path.join(dir, 'data')
}

async function journals(dataDir: string): Promise<string[]> {
  const dir = path.join(dataDir, 'keys')
  return (await readdir(dir))
    .filter((name) => name.endsWith('.keys'))
    .map((name) => path.join(dir, name))
}

async function setModes(files: readonly string[], mode: number): Promise<void> {
  for (const file of files) await chmod(file, mode)
}

async function userIds(url: string): Promise<string[]> {
  const res = await request('GET', `${url}/users?limit=100`, { token })
  assert.equal(res.status, 200, res.text)
  return res
    .json<UserPage>()
    .items.map((user) => user.id)
    .sort()
}

describe('kept idempotency keys whose journal the service may not read (file store)', () => {
  it('refuses the start naming the journal, and answers a keyed request 503 storage_unavailable when one turns unreadable while running', {
    timeout: 90_000,
  }, async (t) => {
    const found = serviceUser()
    if (found === undefined) {
      t.skip(
        'cannot run the service as a user other than root here (nobody cannot run node on this tree)',
      )
      return
    }
    const user = found === 'self' ? undefined : found
    const dataDir = await dataDirFor(t, user)
    const options: ChildOptions = { dataDir, user }
    const started: RunningChild[] = []
    t.after(async () => {
      for (const child of started) await child.stop('SIGKILL')
    })
    const start = async (): Promise<RunningChild> => {
      const child = await startChild(options)
      started.push(child)
      return child
    }
    const keyed = { 'idempotency-key': '"kept-before-restore"' }
    const json = { email: uniqueEmail('kept'), name: 'Kept Key' }

    const first = await start()
    const made = await request('POST', `${first.url}/users`, { token, json, headers: keyed })
    assert.equal(made.status, 201, made.text)
    assert.equal((await first.stop()).code, 0)
    const files = await journals(dataDir)
    assert.ok(files.length > 0, 'the key is in a journal after a clean stop')

    // As a restore by root leaves them for a service that runs as another user.
    await setModes(files, 0o000)
    const refused = spawnService(options)
    t.after(() => refused.proc.kill('SIGKILL'))
    // A start that is not refused runs on: it is given as long as a refusal could take.
    const exit = await Promise.race([refused.exited, sleep(20_000)])
    assert.equal(exit?.code, 1, `the start was not refused:\n${refused.stdout()}`)
    const refusal = refused.stdout()
    assert.match(refusal, /"level":"error","msg":"could not load the store"/)
    assert.ok(refusal.includes('EACCES'), refusal)
    assert.ok(
      files.some((file) => refusal.includes(file)),
      `the refusal names the journal:\n${refusal}`,
    )

    await setModes(files, 0o600)
    const running = await start()
    // A new key waits for the journals' first reading: it is over when this is answered.
    const other = await request('POST', `${running.url}/users`, {
      token,
      json: { email: uniqueEmail('other'), name: 'Other' },
      headers: { 'idempotency-key': '"a-new-key"' },
    })
    assert.equal(other.status, 201, other.text)
    const before = await userIds(running.url)
    await setModes(files, 0o000)
    const retried = await request('POST', `${running.url}/users`, { token, json, headers: keyed })
    assertProblem(retried, 503, 'storage_unavailable')
    assert.ok(retried.headers.get('retry-after') !== null, 'a 503 says when to try again')
    assert.deepEqual(await userIds(running.url), before, 'the refused retry changed nothing')
    await waitForOutput(running, '"msg":"storage fault"')
    const fault = running
      .stdout()
      .split('\n')
      .find((line) => line.includes('"msg":"storage fault"'))
    assert.match(fault ?? '', /"level":"error"/)
    assert.match(fault ?? '', /"errno":"EACCES"/)
    assert.ok(
      files.some((file) => fault?.includes(file)),
      `the fault names the journal: ${fault}`,
    )
    assert.doesNotMatch(running.stdout(), /"msg":"request failed"/)

    await setModes(files, 0o600)
    const replayed = await request('POST', `${running.url}/users`, { token, json, headers: keyed })
    assert.equal(replayed.status, 201, replayed.text)
    assert.equal(replayed.headers.get('idempotent-replayed'), 'true')
    assert.equal(replayed.json<User>().id, made.json<User>().id)
  })
})
