import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import { assertInsufficientScope, decodePart } from '../helpers/auth-tokens.js'
import { type Child, PROJECT_ROOT, sleep, spawnService, startChild } from '../helpers/child.js'
import { serviceScript } from '../helpers/child-scripts.js'
import { request } from '../helpers/http.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const NO_SECRET = { JWT_SECRET: undefined, JWT_SECRETS: undefined, NODE_ENV: 'development' }
const JWT = /eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/g

/** Waits until a child's stderr matches, or fails after a while. */
async function waitForStderr(child: Child, pattern: RegExp, timeoutMs = 30_000): Promise<string> {
  const deadline = Date.now() + timeoutMs
  while (!pattern.test(child.stderr())) {
    if (Date.now() > deadline)
      assert.fail(`stderr never matched ${String(pattern)}:\n${child.stderr()}`)
    await sleep(20)
  }
  return child.stderr()
}

/** Waits for a child that must refuse to start; returns its exit code. */
async function expectRefusal(child: Child): Promise<number | null> {
  const timer = setTimeout(() => {
    child.proc.kill('SIGKILL')
  }, 60_000)
  const { code } = await child.exited
  clearTimeout(timer)
  assert.notEqual(code, 0, `the process should exit with an error:\n${child.stderr()}`)
  assert.doesNotMatch(child.stdout(), /"msg":"listening"/, 'it listened')
  return code
}

describe('first start without a secret', () => {
  it('writes DATA_DIR/.jwt-secret, prints a working token once, and keeps the secret on restart', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const file = path.join(dataDir, '.jwt-secret')

    const first = await startChild({ dataDir, env: NO_SECRET }, 60_000)
    t.after(() => first.stop('SIGKILL'))
    const stderr = await waitForStderr(first, /curl/)

    // The secret file: base64url: form, mode 0600, at least 32 bytes of key.
    const text = await readFile(file, 'utf8')
    assert.match(text, /^base64url:[A-Za-z0-9_-]+\n?$/)
    const encoded = text.trim().slice('base64url:'.length)
    assert.ok(
      Buffer.from(encoded, 'base64url').length >= 32,
      `only ${Buffer.from(encoded, 'base64url').length} bytes`,
    )
    assert.equal((await stat(file)).mode & 0o777, 0o600)

    // It says so, and prints a token with all three scopes and a curl command, on stderr only.
    assert.ok(stderr.includes(file), `stderr should name ${file}:\n${stderr}`)
    const tokens = stderr.match(JWT) ?? []
    assert.ok(tokens.length >= 1, `no token on stderr:\n${stderr}`)
    const [token] = tokens
    assert.ok(token !== undefined)
    assert.ok(
      tokens.every((found) => found === token),
      'more than one token was printed',
    )
    const claims = decodePart(token, 1)
    assert.equal(typeof claims['sub'], 'string')
    assert.equal(typeof claims['exp'], 'number')
    assert.deepEqual(String(claims['scope']).split(' ').sort(), [
      'users:admin',
      'users:read',
      'users:write',
    ])
    // The command that makes more tokens is the one that exists here: node with the same script
    // (the child's, shown from its working directory, the project's root), and the data
    // directory, which is not `data` in the working directory.
    const script = path.relative(PROJECT_ROOT, serviceScript())
    assert.ok(
      stderr.includes(
        `\n  node ${script} token --data-dir ${dataDir} --sub feed-reader --scope events:read\n`,
      ),
      `the feed's scope is shown as an example:\n${stderr}`,
    )
    const curl = stderr.split('\n').find((line) => line.includes('curl'))
    assert.ok(curl !== undefined)
    assert.ok(curl.includes(token), `the curl line should carry the token: ${curl}`)
    assert.ok(
      curl.includes(`${first.url}/users`),
      `the curl line should call ${first.url}/users: ${curl}`,
    )
    assert.match(curl, /Authorization: Bearer /)
    assert.ok(!first.stdout().includes(token), 'the token shows on stdout')
    assert.ok(
      !first.stdout().includes(encoded) && !stderr.includes(encoded),
      'the secret was printed',
    )
    for (const line of first.stdout().trim().split('\n'))
      assert.doesNotThrow(() => JSON.parse(line), `stdout is not JSON lines: ${line}`)

    // The printed token works for reading, writing and administering.
    const created = await request('POST', `${first.url}/users`, {
      token,
      json: { email: uniqueEmail(), name: 'First' },
    })
    assert.equal(created.status, 201, created.text)
    const id = created.json<{ id: string }>().id
    assert.equal((await request('GET', `${first.url}/users/${id}`, { token })).status, 200)
    assert.equal(
      (await request('POST', `${first.url}/users/${id}:activate`, { token })).status,
      200,
    )
    assert.equal((await first.stop()).code, 0)

    // A restart keeps the secret, prints no token, and the first token still works.
    const second = await startChild({ dataDir, env: NO_SECRET }, 60_000)
    t.after(() => second.stop('SIGKILL'))
    assert.equal(await readFile(file, 'utf8'), text)
    const res = await request('GET', `${second.url}/users/${id}`, { token })
    assert.equal(res.status, 200, res.text)
    assert.equal(res.json<{ status: string }>().status, 'active')
    await sleep(200)
    assert.doesNotMatch(second.stderr(), JWT, `a restart printed a token:\n${second.stderr()}`)
    assert.doesNotMatch(second.stderr(), /curl/)
    assert.ok(!second.stdout().includes(token) && !second.stdout().includes(encoded))
    assert.equal((await second.stop()).code, 0)
  })

  it('writes no secret file when JWT_SECRET is set', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const child = await startChild({ dataDir, env: { NODE_ENV: 'development' } }, 60_000)
    t.after(() => child.stop('SIGKILL'))
    assert.equal((await request('GET', `${child.url}/users`, { token: makeToken() })).status, 200)
    assert.equal(existsSync(path.join(dataDir, '.jwt-secret')), false)
    await sleep(200)
    assert.doesNotMatch(child.stderr(), JWT)
    assert.equal((await child.stop()).code, 0)
  })

  it('prefers JWT_SECRET to a kept .jwt-secret', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    await mkdir(dataDir, { recursive: true })
    const kept = randomBytes(32)
    await writeFile(
      path.join(dataDir, '.jwt-secret'),
      `base64url:${kept.toString('base64url')}\n`,
      { mode: 0o600 },
    )
    const child = await startChild({ dataDir, env: { NODE_ENV: 'development' } }, 60_000)
    t.after(() => child.stop('SIGKILL'))
    assert.equal((await request('GET', `${child.url}/users`, { token: makeToken() })).status, 200)
    assert.equal(
      (await request('GET', `${child.url}/users`, { token: makeToken({ secret: kept }) })).status,
      401,
    )
    assert.equal((await child.stop()).code, 0)
  })

  it('refuses to start in production, naming JWT_SECRET, without listening or writing a secret', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const child = spawnService({ dataDir, env: { ...NO_SECRET, NODE_ENV: 'production' } })
    await expectRefusal(child)
    assert.match(child.stderr(), /JWT_SECRET/)
    assert.equal(existsSync(path.join(dataDir, '.jwt-secret')), false)
  })
})

describe('the first-start message', () => {
  it('names the scopes its token has: GET /events with it is 403, and the printed feed command works', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const child = await startChild({ dataDir, env: NO_SECRET }, 60_000)
    t.after(() => child.stop('SIGKILL'))
    const stderr = await waitForStderr(child, /events:read\n/)
    assert.match(
      stderr,
      /A token with the scopes users:read, users:write, users:admin \(not events:read or webhooks:admin\)/,
    )
    assert.doesNotMatch(stderr, /every scope/)
    const [token] = stderr.match(JWT) ?? []
    assert.ok(token !== undefined)
    assertInsufficientScope(await request('GET', `${child.url}/events`, { token }), 'events:read')

    // The feed command, run as printed, where the service runs, signs a token the feed takes:
    // also from a shell that does not have the DATA_DIR the service was started with.
    const line = stderr.split('\n').find((text) => text.includes('--sub feed-reader'))
    assert.ok(line !== undefined, stderr)
    const [command, ...args] = line.trim().split(' ')
    assert.equal(command, 'node')
    const elsewhere = path.join(await makeTempDir(t), 'data')
    const printed = spawnService({ dataDir: elsewhere, env: NO_SECRET, args })
    const { code } = await printed.exited
    assert.equal(code, 0, printed.stderr())
    const feed = await request('GET', `${child.url}/events`, { token: printed.stdout().trim() })
    assert.equal(feed.status, 200, feed.text)
  })

  it('names npm run -s token under npm start', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const env = { ...NO_SECRET, npm_lifecycle_event: 'start' }
    const child = await startChild({ dataDir, env }, 60_000)
    t.after(() => child.stop('SIGKILL'))
    const stderr = await waitForStderr(child, /events:read\n/)
    assert.ok(
      stderr.includes(
        `\n  npm run -s token -- --data-dir ${dataDir} --sub feed-reader --scope events:read\n`,
      ),
      stderr,
    )
  })

  it('prints a curl line on loopback when the service binds every interface (HOST=0.0.0.0)', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const child = await startChild({ dataDir, env: { ...NO_SECRET, HOST: '0.0.0.0' } }, 60_000)
    t.after(() => child.stop('SIGKILL'))
    const stderr = await waitForStderr(child, /events:read\n/)
    const port = new URL(child.url).port
    const curl = stderr.split('\n').find((line) => line.includes('curl'))
    assert.ok(curl !== undefined, stderr)
    assert.ok(curl.endsWith(` http://127.0.0.1:${port}/users`), curl)
    const [token] = stderr.match(JWT) ?? []
    const res = await request('GET', `http://127.0.0.1:${port}/users`, { token })
    assert.equal(res.status, 200, res.text)
  })
})

describe('a bad secret refuses to start', () => {
  it('refuses a 31-byte JWT_SECRET, naming the variable and not the secret', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const secret = 'short-secret-of-31-bytes-abcdef'
    assert.equal(Buffer.byteLength(secret), 31)
    const child = spawnService({ dataDir, env: { JWT_SECRET: secret, NODE_ENV: 'development' } })
    await expectRefusal(child)
    assert.match(child.stderr(), /JWT_SECRET/)
    assert.ok(
      !child.stderr().includes(secret) && !child.stdout().includes(secret),
      'the secret was printed',
    )
    assert.equal(existsSync(path.join(dataDir, '.jwt-secret')), false)
  })

  it('refuses JWT_SECRETS with a short key, naming the variable and printing neither secret', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const good = 'a-long-enough-secret-0123456789-abcdefgh'
    const short = 'too-short-secret'
    const child = spawnService({
      dataDir,
      env: { JWT_SECRET: undefined, JWT_SECRETS: `k1=${good},k2=${short}` },
    })
    await expectRefusal(child)
    assert.match(child.stderr(), /JWT_SECRETS/)
    for (const secret of [good, short]) {
      assert.ok(
        !child.stderr().includes(secret) && !child.stdout().includes(secret),
        'a secret was printed',
      )
    }
  })
})
