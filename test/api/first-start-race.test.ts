import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { type Child, sleep, spawnService } from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { makeTempDir } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const NO_SECRET = { JWT_SECRET: undefined, JWT_SECRETS: undefined, NODE_ENV: 'development' }
const JWT = /eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/
const WROTE_SECRET = /a new random secret was written/
const ROUNDS = 8
const STARTS = 2

/** The pid of a child that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
  const pid = child.pid
  if (pid === undefined) throw new Error('could not spawn a child')
  await new Promise((resolve) => child.on('exit', resolve))
  return pid
}

const listeningUrl = (child: Child): string | undefined =>
  /"msg":"listening","url":"([^"]+)"/.exec(child.stdout())?.[1]

/** Waits until every child has either printed its listening line or exited. */
async function settled(children: readonly Child[], timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  const done = (child: Child): boolean =>
    listeningUrl(child) !== undefined || child.proc.exitCode !== null
  while (!children.every(done)) {
    if (Date.now() > deadline)
      assert.fail(
        `the services neither listened nor exited:\n${children.map((child) => child.stderr()).join('\n')}`,
      )
    await sleep(20)
  }
}

/** Starts `STARTS` services at once on `dataDir` without a secret; checks that exactly one runs. */
async function raceFirstStarts(t: TestContext, dataDir: string, round: number): Promise<void> {
  const children = Array.from({ length: STARTS }, () => spawnService({ dataDir, env: NO_SECRET }))
  for (const child of children)
    t.after(() => {
      child.proc.kill('SIGKILL')
    })
  await settled(children)
  const report = children
    .map((child) => `pid ${String(child.proc.pid)}:\n${child.stderr()}`)
    .join('\n')
  const running = children.filter((child) => listeningUrl(child) !== undefined)
  assert.equal(running.length, 1, `round ${round}: ${running.length} services run\n${report}`)
  const [survivor] = running
  const url = survivor === undefined ? undefined : listeningUrl(survivor)
  assert.ok(survivor !== undefined && url !== undefined)

  // The losers refused on the lock, naming the survivor, and said nothing about a secret.
  for (const loser of children.filter((child) => child !== survivor)) {
    assert.equal((await loser.exited).code, 1, report)
    assert.match(loser.stderr(), /cannot start: the data directory .* is already in use/, report)
    assert.ok(loser.stderr().includes(`(pid ${String(survivor.proc.pid)})`), report)
    assert.doesNotMatch(loser.stderr(), WROTE_SECRET)
    assert.doesNotMatch(loser.stderr(), JWT)
  }

  // The survivor wrote the secret, and the secret in the file is the one it uses.
  const file = path.join(dataDir, '.jwt-secret')
  const text = await readFile(file, 'utf8')
  assert.match(text, /^base64url:[A-Za-z0-9_-]+\n?$/)
  assert.equal((await stat(file)).mode & 0o777, 0o600)
  const secret = Buffer.from(text.trim().slice('base64url:'.length), 'base64url')
  assert.ok(secret.length >= 32)
  const ready = Date.now() + 30_000
  while ((await request('GET', `${url}/readyz`)).status !== 200) {
    if (Date.now() > ready) assert.fail(`the survivor never became ready:\n${survivor.stderr()}`)
    await sleep(20)
  }
  // Printed before it listened: by now only the pipe may be behind.
  const printedBy = Date.now() + 5_000
  while (!/curl/.test(survivor.stderr())) {
    if (Date.now() > printedBy)
      assert.fail(`round ${round}: the survivor did not write the secret:\n${survivor.stderr()}`)
    await sleep(20)
  }
  assert.match(survivor.stderr(), WROTE_SECRET)
  const fromFile = await request('GET', `${url}/users`, { token: makeToken({ secret }) })
  assert.equal(
    fromFile.status,
    200,
    `round ${round}: a token signed with ${file} is refused: ${fromFile.text}`,
  )
  const printed = JWT.exec(survivor.stderr())?.[0]
  assert.ok(printed !== undefined)
  assert.equal((await request('GET', `${url}/users`, { token: printed })).status, 200)
  assert.equal((await request('GET', `${url}/users`, { token: makeToken() })).status, 401)
  // Nobody left a half-written secret behind.
  assert.deepEqual(
    (await readdir(dataDir)).filter((name) => name.includes('jwt-secret')),
    ['.jwt-secret'],
  )

  survivor.proc.kill('SIGTERM')
  assert.equal((await survivor.exited).code, 0)
}

describe('two first starts at once without a secret', { timeout: 180_000 }, () => {
  it('run exactly one service, which uses the secret it wrote to DATA_DIR/.jwt-secret', async (t) => {
    const base = await makeTempDir(t, 'first-start-race-')
    for (let round = 0; round < ROUNDS; round += 1) {
      await raceFirstStarts(t, path.join(base, `round-${round}`), round)
    }
  })

  it('run exactly one service when a stale lock of a dead process is in DATA_DIR', async (t) => {
    const base = await makeTempDir(t, 'first-start-race-')
    const dead = await deadPid()
    for (let round = 0; round < ROUNDS; round += 1) {
      const dataDir = path.join(base, `round-${round}`)
      await mkdir(dataDir, { mode: 0o700 })
      await writeFile(path.join(dataDir, '.lock.1'), `${dead} ${'0'.repeat(32)}\n`)
      await raceFirstStarts(t, dataDir, round)
    }
  })
})
