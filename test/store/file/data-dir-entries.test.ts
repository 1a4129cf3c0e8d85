import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import {
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  symlink,
  truncate,
  writeFile,
} from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../../src/domain/user.js'
import {
  LOADED_LINE,
  type RunningChild,
  spawnService,
  startChild,
  waitForOutput,
} from '../../helpers/child.js'
import { request } from '../../helpers/http.js'
import { refusedStart } from '../../helpers/refused-start.js'
import { makeTempDir, uniqueEmail } from '../../helpers/service.js'
import { makeToken } from '../../helpers/tokens.js'

/*
 * What a careless or hostile operator leaves in DATA_DIR where the store reads and writes its own
 * files (symbolic links, directories, a huge file): the service (often root) never writes through
 * a link to a file outside the data directory, never drops a user without a word, and never reads
 * a file no user could fill.
 */

const token = makeToken({ scope: 'users:read users:write users:admin events:read' })
const OUTSIDE = 'a file outside the data directory\nwhose last line has no newline'

interface Place {
  readonly dataDir: string
  /** A file beside the data directory, which a link in it leads to. */
  readonly outside: string
}

/** The first line the child logged that holds every piece of `text`. */
function logLine(child: RunningChild, ...text: string[]): string | undefined {
  return child
    .stdout()
    .split('\n')
    .find((line) => text.every((piece) => line.includes(piece)))
}

async function place(t: TestContext): Promise<Place> {
  const dir = await makeTempDir(t, 'data-dir-entries-')
  const outside = path.join(dir, 'outside.txt')
  await writeFile(outside, OUTSIDE)
  return { dataDir: path.join(dir, 'data'), outside }
}

/** Writes one user through a start of the service, stopped cleanly. */
async function withOneUser(t: TestContext, dataDir: string): Promise<User> {
  const child = await startChild({ dataDir })
  t.after(() => child.stop('SIGKILL'))
  const created = await request('POST', `${child.url}/users`, {
    token,
    json: { email: uniqueEmail('links'), name: 'Linked' },
  })
  assert.equal(created.status, 201, created.text)
  assert.equal((await child.stop()).code, 0)
  return created.json<User>()
}

/**
 * Puts something else (`put`) where each file a start reads belongs, in turn (the file itself
 * moved aside and back), and checks the refused start's error with `check`.
 */
async function eachStartFile(
  t: TestContext,
  dataDir: string,
  put: (file: string) => Promise<unknown>,
  check: (error: string, file: string) => void,
): Promise<void> {
  const endpoint = path.join('webhooks', '01a22e1a-47bf-70c9-a76a-bfe01780cec5.json')
  const segment = path.join('events', '0000000000000002.ndjson')
  for (const name of ['format', 'checkpoint.json', 'snapshot', endpoint, segment]) {
    const file = path.join(dataDir, name)
    const kept = `${file}.kept`
    await rename(file, kept).catch(() => undefined)
    await put(file)
    check(await refusedStart(t, dataDir), file)
    await rm(file, { recursive: true })
    await rename(kept, file).catch(() => undefined)
  }
}

describe('links, directories and huge files in the data directory (file store)', () => {
  it("a link among the event log's segments refuses the start, naming it, and its target is left whole", async (t) => {
    const { dataDir, outside } = await place(t)
    await withOneUser(t, dataDir)
    const link = path.join(dataDir, 'events', '0000000000000002.ndjson')
    await symlink(outside, link)
    const error = await refusedStart(t, dataDir)
    assert.ok(error.includes(`${link} is a symbolic link`), error)
    assert.equal(await readFile(outside, 'utf8'), OUTSIDE, 'not cut, not appended to')
  })

  it("a link at a kept keys' journal refuses the start, and one put there while running is never written through", async (t) => {
    const { dataDir, outside } = await place(t)
    await withOneUser(t, dataDir)
    const env = { IDEMPOTENCY_TTL_S: '3600' }
    const child = await startChild({ dataDir, env })
    t.after(() => child.stop('SIGKILL'))
    // The journals a key kept in the next minute goes to: one per 30 s of its expiry.
    const now = Date.now() + 3_600_000
    const links: string[] = []
    for (let at = now - 60_000; at <= now + 120_000; at += 30_000) {
      const start = new Date(Math.floor(at / 30_000) * 30_000).toISOString()
      const link = path.join(dataDir, 'keys', `${start.slice(0, 19).replace(/[-:]/g, '')}.keys`)
      await symlink(outside, link)
      links.push(link)
    }
    const created = await request('POST', `${child.url}/users`, {
      token,
      json: { email: uniqueEmail('keyed'), name: 'Keyed' },
      headers: { 'idempotency-key': '"links-1"' },
    })
    assert.equal(created.status, 201, created.text)
    // The journal's line is appended after the answer: wait past a sweep's retry too.
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    assert.equal(await readFile(outside, 'utf8'), OUTSIDE, 'no key line written outside')
    const again = await request('POST', `${child.url}/users`, {
      token,
      json: { email: JSON.parse(created.text).email, name: 'Keyed' },
      headers: { 'idempotency-key': '"links-1"' },
    })
    assert.equal(again.status, 201, again.text)
    assert.equal(again.json<User>().id, created.json<User>().id, 'the key still answers')
    assert.equal((await child.stop('SIGKILL')).signal, 'SIGKILL')

    const error = await refusedStart(t, dataDir)
    assert.match(error, /NotOwnFileError: .*\.keys is a symbolic link/)
    assert.equal(await readFile(outside, 'utf8'), OUTSIDE)
  })

  it("a link at a user's file is quarantined with a log line, and the user's events are held back, not voided", async (t) => {
    const { dataDir, outside } = await place(t)
    const user = await withOneUser(t, dataDir)
    const file = path.join(dataDir, 'users', `${user.id}.json`)
    await rename(file, outside)
    await symlink(outside, file)
    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    await waitForOutput(child, LOADED_LINE)
    const quarantined = logLine(child, '"msg":"quarantined a file"', user.id)
    assert.ok(quarantined !== undefined, child.stdout())
    assert.match(quarantined, /symbolic link/)
    assert.equal((await request('GET', `${child.url}/users/${user.id}`, { token })).status, 404)
    assert.equal((await child.stop()).code, 0)
    assert.deepEqual(await readdir(path.join(dataDir, 'quarantine')), [`${user.id}.json`])

    // The file itself put back: the user and its event are served again.
    await rename(outside, file)
    const back = await startChild({ dataDir })
    t.after(() => back.stop('SIGKILL'))
    const got = await request('GET', `${back.url}/users/${user.id}`, { token })
    assert.equal(got.status, 200, got.text)
    assert.deepEqual(got.json<User>(), user)
    const events = await request('GET', `${back.url}/events`, { token })
    assert.equal(events.status, 200, events.text)
    assert.match(events.text, new RegExp(`"type":"user.created","[^]*"userId":"${user.id}"`))
  })

  it('a huge file named as a user is quarantined unread, and the start goes on', async (t) => {
    const { dataDir } = await place(t)
    const user = await withOneUser(t, dataDir)
    // Sparse: 600 MB that no start may read into one string (V8 caps strings at 512 MiB).
    const huge = '01a22e09-e87e-70ef-883f-ece810b13479.json'
    await writeFile(path.join(dataDir, 'users', huge), '')
    await truncate(path.join(dataDir, 'users', huge), 600 * 1024 * 1024)
    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    await waitForOutput(child, LOADED_LINE)
    assert.match(
      child.stdout(),
      /"msg":"quarantined a file".*01a22e09-e87e-70ef-883f-ece810b13479\.json.*larger than any user file/,
    )
    const got = await request('GET', `${child.url}/users/${user.id}`, { token })
    assert.equal(got.status, 200, got.text)
    assert.deepEqual(await readdir(path.join(dataDir, 'quarantine')), [huge])
  })

  it('a directory where one of its files belongs refuses the start, naming that file', async (t) => {
    const { dataDir } = await place(t)
    await withOneUser(t, dataDir)
    await eachStartFile(t, dataDir, mkdir, (error, file) => {
      assert.ok(error.includes(`EISDIR`) && error.includes(`'${file}'`), error)
    })
    // The secret of a start without JWT_SECRET: a configuration error, without a stack trace.
    const secret = path.join(dataDir, '.jwt-secret')
    await mkdir(secret)
    const child = spawnService({ dataDir, env: { JWT_SECRET: undefined } })
    t.after(() => {
      child.proc.kill('SIGKILL')
    })
    assert.equal((await child.exited).code, 1)
    assert.equal(
      child.stderr(),
      `user-service: cannot start: ${secret} cannot be read (EISDIR): it holds the secret a start without JWT_SECRET uses; make it a file this user may read, or set JWT_SECRET\n`,
    )
  })
})

describe('a FIFO where a file the start reads belongs', () => {
  it('refuses the start, naming it, instead of waiting for ever on it', async (t) => {
    const { dataDir } = await place(t)
    await withOneUser(t, dataDir)
    await eachStartFile(
      t,
      dataDir,
      async (file) => {
        execFileSync('mkfifo', [file])
      },
      (error, file) => {
        assert.ok(error.startsWith(`NotOwnFileError: ${file} is not a plain file`), error)
        assert.ok(!error.includes(`'${file}'`), error)
      },
    )
    const secret = path.join(dataDir, '.jwt-secret')
    execFileSync('mkfifo', [secret])
    const child = spawnService({ dataDir, env: { JWT_SECRET: undefined } })
    t.after(() => {
      child.proc.kill('SIGKILL')
    })
    const timer = setTimeout(() => child.proc.kill('SIGKILL'), 20_000)
    const exit = await child.exited
    clearTimeout(timer)
    assert.equal(exit.code, 1, child.stderr())
    assert.match(child.stderr(), new RegExp(`${secret} is not a plain file`))
  })
})

describe('a user file edited by hand to an older version', () => {
  it("voids the user's later events for good, and says so at warn, naming the user", async (t) => {
    const { dataDir } = await place(t)
    const user = await withOneUser(t, dataDir)
    const first = await startChild({ dataDir })
    t.after(() => first.stop('SIGKILL'))
    for (const name of ['Renamed once', 'Renamed twice']) {
      const patched = await request('PATCH', `${first.url}/users/${user.id}`, {
        token,
        json: { name },
      })
      assert.equal(patched.status, 200, patched.text)
    }
    assert.equal((await first.stop()).code, 0)
    // The file put back at version 1, as an operator's edit of the version would.
    await writeFile(path.join(dataDir, 'users', `${user.id}.json`), JSON.stringify(user))
    await rm(path.join(dataDir, 'snapshot'), { force: true })

    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    await waitForOutput(child, LOADED_LINE)
    const warned = logLine(child, '"msg":"events voided')
    assert.ok(warned !== undefined, child.stdout())
    const fields = JSON.parse(warned) as { level: string; events: number; users: string[] }
    assert.deepEqual([fields.level, fields.events, fields.users], ['warn', 2, [user.id]])
    const got = await request('GET', `${child.url}/users/${user.id}`, { token })
    assert.equal(got.json<User>().version, 1)
  })
})

describe('a directory at a kept keys journal name', () => {
  it('is logged at warn naming its path, and the service goes on', async (t) => {
    const { dataDir } = await place(t)
    const user = await withOneUser(t, dataDir)
    const journal = path.join(dataDir, 'keys', '20991231T235930.keys')
    await mkdir(journal)
    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    await waitForOutput(child, 'could not read the kept idempotency keys')
    const warned = logLine(child, 'could not read the kept idempotency keys')
    assert.ok(warned?.includes(journal), child.stdout())
    assert.equal((await request('GET', `${child.url}/users/${user.id}`, { token })).status, 200)
  })
})
