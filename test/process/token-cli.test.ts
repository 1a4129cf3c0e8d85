import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { parseDuration } from '../../src/auth/sign-token.js'
import { parseConfig } from '../../src/process/config.js'
import { resolveKeys, SECRET_FILE } from '../../src/process/first-start.js'
import { assertInsufficientScope, decodePart } from '../helpers/auth-tokens.js'
import { spawnService } from '../helpers/child.js'
import { serviceScript } from '../helpers/child-scripts.js'
import { assertProblem } from '../helpers/http.js'
import { makeTempDir, startService, uniqueEmail } from '../helpers/service.js'
import { nowSeconds, TEST_SECRET } from '../helpers/tokens.js'

const CLI = serviceScript()
const SECRET_A = 'rotation-secret-a-0123456789-abcdefghij'
const SECRET_B = 'rotation-secret-b-0123456789-abcdefghij'

interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `user-service token ARGS` (the service's bundle) with a clean environment (JWT_SECRET = TEST_SECRET unless env says). */
async function runCli(
  dataDir: string,
  args: readonly string[],
  env: Record<string, string | undefined> = {},
): Promise<CliResult> {
  const child = spawnService({ dataDir, args: [CLI, 'token', ...args], env })
  const timer = setTimeout(() => {
    child.proc.kill('SIGKILL')
  }, 60_000)
  const { code } = await child.exited
  clearTimeout(timer)
  return { code, stdout: child.stdout(), stderr: child.stderr() }
}

/** The one token a successful run printed. */
function tokenOf(result: CliResult): string {
  assert.equal(result.code, 0, `the command failed: ${result.stderr}`)
  const lines = result.stdout.split('\n').filter((line) => line !== '')
  assert.equal(lines.length, 1, `stdout should be one token: ${JSON.stringify(result.stdout)}`)
  const [token] = lines
  assert.ok(token !== undefined)
  assert.match(token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
  return token
}

/** Asserts a refusal: non-zero exit, nothing on stdout, and a message on stderr matching `pattern`. */
function assertRefused(result: CliResult, pattern: RegExp): void {
  assert.notEqual(result.code, 0, `the command should fail: ${result.stdout}`)
  assert.equal(result.stdout, '')
  assert.match(result.stderr, pattern)
}

async function tempData(t: TestContext): Promise<string> {
  return path.join(await makeTempDir(t), 'data')
}

describe('parseDuration', () => {
  it('reads seconds, minutes, hours and days', () => {
    assert.equal(parseDuration('90'), 90)
    assert.equal(parseDuration('90s'), 90)
    assert.equal(parseDuration('15m'), 900)
    assert.equal(parseDuration('1h'), 3600)
    assert.equal(parseDuration('7d'), 604_800)
    assert.equal(parseDuration('3650d'), 315_360_000)
    assert.equal(parseDuration(' 2h '), 7200)
  })

  it('refuses anything else, and zero', () => {
    for (const text of [
      '',
      '0',
      '0s',
      '0h',
      '-1h',
      '1.5h',
      '1y',
      'h',
      '1h30m',
      '1 h',
      'one hour',
      '1H',
    ]) {
      const message = /^0[smhd]?$/.test(text)
        ? `a duration must be positive: "${text}"`
        : `not a duration: "${text}" (try 1h)`
      assert.throws(() => parseDuration(text), { name: 'Error', message }, JSON.stringify(text))
    }
  })
})

describe('npm run token (user-service token)', () => {
  it('prints one token that the service accepts for its scope only', async (t) => {
    const dataDir = await tempData(t)
    const before = nowSeconds()
    const token = tokenOf(
      await runCli(dataDir, ['--sub', 'X', '--scope', 'users:read', '--ttl', '1h']),
    )
    const after = nowSeconds()
    const header = decodePart(token, 0)
    assert.equal(header['alg'], 'HS256')
    assert.equal(header['kid'], undefined)
    const claims = decodePart(token, 1)
    assert.equal(claims['sub'], 'X')
    assert.equal(claims['scope'], 'users:read')
    assert.equal(typeof claims['exp'], 'number')
    assert.equal(typeof claims['iat'], 'number')
    assert.equal(Number(claims['exp']) - Number(claims['iat']), 3600)
    assert.ok(
      Number(claims['exp']) >= before + 3600 && Number(claims['exp']) <= after + 3600,
      `exp ${String(claims['exp'])}`,
    )

    const s = await startService(t)
    const list = await s.call('GET', '/users', { token })
    assert.equal(list.status, 200, list.text)
    const snapshot = await s.snapshot()
    assertInsufficientScope(
      await s.call('POST', '/users', { token, json: { email: uniqueEmail(), name: 'Refused' } }),
      'users:write',
    )
    assert.deepEqual(await s.snapshot(), snapshot)
  })

  it('reads --ttl as 90s, 15m and 7d, and gives all scopes for one hour by default', async (t) => {
    const dataDir = await tempData(t)
    const runs = await Promise.all([
      runCli(dataDir, ['--sub', 'a', '--ttl', '90s']),
      runCli(dataDir, ['--sub', 'b', '--ttl', '15m']),
      runCli(dataDir, ['--sub', 'c', '--ttl', '7d']),
      runCli(dataDir, ['--sub', 'd']),
      runCli(dataDir, ['--sub', 'e', '--scope', 'users:write users:admin']),
    ])
    const claims = runs.map((run) => decodePart(tokenOf(run), 1))
    const lifetimes = claims.map((claim) => Number(claim['exp']) - Number(claim['iat']))
    assert.deepEqual(lifetimes, [90, 900, 604_800, 3600, 3600])
    assert.deepEqual(String(claims[3]?.['scope']).split(' ').sort(), [
      'events:read',
      'users:admin',
      'users:read',
      'users:write',
      'webhooks:admin',
    ])
    assert.equal(claims[4]?.['scope'], 'users:write users:admin')

    const s = await startService(t)
    const [, , , all, writeAdmin] = runs.map(tokenOf)
    assert.ok(all !== undefined && writeAdmin !== undefined)
    const created = await s.call('POST', '/users', {
      token: all,
      json: { email: uniqueEmail(), name: 'By token' },
    })
    assert.equal(created.status, 201, created.text)
    const id = created.json<{ id: string }>().id
    assert.equal((await s.call('POST', `/users/${id}:activate`, { token: writeAdmin })).status, 200)
    assertInsufficientScope(
      await s.call('GET', `/users/${id}`, { token: writeAdmin }),
      'users:read',
    )
  })

  it('signs with the first key of JWT_SECRETS and puts its kid in the header; --kid picks another', async (t) => {
    const dataDir = await tempData(t)
    const env = { JWT_SECRET: undefined, JWT_SECRETS: `k1=${SECRET_A},k2=${SECRET_B}` }
    const [first, picked, unknown] = await Promise.all([
      runCli(dataDir, ['--sub', 'rot', '--scope', 'users:read'], env),
      runCli(dataDir, ['--sub', 'rot', '--scope', 'users:read', '--kid', 'k2'], env),
      runCli(dataDir, ['--sub', 'rot', '--kid', 'k3'], env),
    ])
    const firstToken = tokenOf(first)
    const pickedToken = tokenOf(picked)
    assert.equal(decodePart(firstToken, 0)['kid'], 'k1')
    assert.equal(decodePart(pickedToken, 0)['kid'], 'k2')
    assertRefused(unknown, /--kid: no key has kid "k3" \(kids are given in JWT_SECRETS/)

    const both = await startService(t, { secrets: { k1: SECRET_A, k2: SECRET_B } })
    assert.equal((await both.call('GET', '/users', { token: firstToken })).status, 200)
    assert.equal((await both.call('GET', '/users', { token: pickedToken })).status, 200)
    // Each was signed by its own key: a service holding only that key accepts it.
    const onlyA = await startService(t, { secret: SECRET_A })
    assert.equal((await onlyA.call('GET', '/users', { token: firstToken })).status, 200)
    assertProblem(await onlyA.call('GET', '/users', { token: pickedToken }), 401, 'token_invalid')
    const onlyB = await startService(t, { secret: SECRET_B })
    assert.equal((await onlyB.call('GET', '/users', { token: pickedToken })).status, 200)
  })

  it('adds iss and aud when JWT_ISSUER and JWT_AUDIENCE are set', async (t) => {
    const dataDir = await tempData(t)
    const env = { JWT_ISSUER: 'https://issuer.example', JWT_AUDIENCE: 'users-api' }
    const token = tokenOf(await runCli(dataDir, ['--sub', 'i', '--scope', 'users:read'], env))
    const claims = decodePart(token, 1)
    assert.equal(claims['iss'], 'https://issuer.example')
    assert.equal(claims['aud'], 'users-api')
    const s = await startService(t, { issuer: 'https://issuer.example', audience: 'users-api' })
    assert.equal((await s.call('GET', '/users', { token })).status, 200)
  })

  it('refuses a missing --sub, an unknown scope or a bad --ttl with a message', async (t) => {
    const dataDir = await tempData(t)
    const [noSub, emptySub, blankSub, noScope, badScope, unknownOption, ...badTtls] =
      await Promise.all([
        runCli(dataDir, ['--scope', 'users:read']),
        runCli(dataDir, ['--sub', '', '--scope', 'users:read']),
        runCli(dataDir, ['--sub', '  ', '--scope', 'users:read']),
        runCli(dataDir, ['--sub', 'X', '--scope', '']),
        runCli(dataDir, ['--sub', 'X', '--scope', 'users:read users:delete']),
        runCli(dataDir, ['--sub', 'X', '--bogus']),
        runCli(dataDir, ['--sub', 'X', '--ttl', '1y']),
        runCli(dataDir, ['--sub', 'X', '--ttl', '0']),
        runCli(dataDir, ['--sub', 'X', '--ttl=-5m']),
        runCli(dataDir, ['--sub', 'X', '--ttl', '1000000000000000000000d']),
        runCli(dataDir, ['--sub', 'X', '--ttl', '3651d']),
      ])
    assert.ok(
      noSub !== undefined &&
        emptySub !== undefined &&
        blankSub !== undefined &&
        noScope !== undefined &&
        badScope !== undefined &&
        unknownOption !== undefined,
    )
    assertRefused(noSub, /--sub/)
    assertRefused(emptySub, /--sub/)
    assertRefused(blankSub, /--sub/)
    assertRefused(noScope, /--scope needs at least one scope/)
    assertRefused(badScope, /users:delete/)
    assertRefused(unknownOption, /--bogus/)
    for (const run of badTtls) assertRefused(run, /duration/)
    assert.ok(
      ![noSub, emptySub, blankSub, noScope, badScope, unknownOption, ...badTtls].some((run) =>
        run.stderr.includes(TEST_SECRET),
      ),
    )
  })

  it('refuses a token the service would refuse: a control character or over 255 characters in --sub, or over 8 KiB', async (t) => {
    const dataDir = await tempData(t)
    const [control, tab, long, longest, huge] = await Promise.all([
      runCli(dataDir, ['--sub', 'ops\u0001', '--scope', 'users:read']),
      runCli(dataDir, ['--sub', 'ops\tteam', '--scope', 'users:read']),
      runCli(dataDir, ['--sub', 'x'.repeat(256), '--scope', 'users:read']),
      runCli(dataDir, ['--sub', '\u{1F600}'.repeat(255), '--scope', 'users:read']),
      runCli(dataDir, ['--sub', 'x', '--scope', 'users:read'], { JWT_AUDIENCE: 'a'.repeat(7000) }),
    ])
    assert.ok(control !== undefined && tab !== undefined && long !== undefined)
    assert.ok(longest !== undefined && huge !== undefined)
    assertRefused(control, /--sub: .*control character/)
    assertRefused(tab, /--sub: .*control character/)
    assertRefused(long, /--sub: .*over 255 characters/)
    tokenOf(longest)
    assertRefused(huge, /8 KiB/)
  })

  it('refuses to sign without a configured secret or DATA_DIR/.jwt-secret, saying how to get one', async (t) => {
    const dataDir = await tempData(t)
    const result = await runCli(dataDir, ['--sub', 'X'], {
      JWT_SECRET: undefined,
      NODE_ENV: 'development',
    })
    assertRefused(result, /JWT_SECRET/)
    assert.match(result.stderr, /\.jwt-secret/)
    assert.equal(existsSync(path.join(dataDir, SECRET_FILE)), false, 'the command wrote a secret')
  })

  it('refuses a short JWT_SECRET, naming the variable and not the secret', async (t) => {
    const dataDir = await tempData(t)
    const result = await runCli(dataDir, ['--sub', 'X'], { JWT_SECRET: 'tiny-secret' })
    assertRefused(result, /JWT_SECRET/)
    assert.ok(!result.stderr.includes('tiny-secret'))
  })

  it('refuses, as the service does, to sign with DATA_DIR/.jwt-secret when NODE_ENV=production', async (t) => {
    const dataDir = await tempData(t)
    resolveKeys(parseConfig({ DATA_DIR: dataDir, NODE_ENV: 'development' }))
    assert.equal(existsSync(path.join(dataDir, SECRET_FILE)), true)
    const env = { JWT_SECRET: undefined, NODE_ENV: 'production' }
    const result = await runCli(dataDir, ['--sub', 'X', '--scope', 'users:read'], env)
    // A production service never reads the file: a token signed with it would be refused.
    assertRefused(result, /JWT_SECRET \(or JWT_SECRETS\) must be set when NODE_ENV=production/)
    assert.match(result.stderr, /never used in production/)
  })

  it('signs with DATA_DIR/.jwt-secret when it is the only secret (as a first start leaves it)', async (t) => {
    const dataDir = await tempData(t)
    const { generatedFile } = resolveKeys(
      parseConfig({ DATA_DIR: dataDir, NODE_ENV: 'development' }),
    )
    assert.equal(generatedFile, path.join(dataDir, SECRET_FILE))
    const secret = (await readFile(path.join(dataDir, SECRET_FILE), 'utf8')).trim()
    const env = { JWT_SECRET: undefined, NODE_ENV: 'development' }
    const token = tokenOf(await runCli(dataDir, ['--sub', 'X', '--scope', 'users:read'], env))
    const s = await startService(t, { secret })
    assert.equal((await s.call('GET', '/users', { token })).status, 200)
    const other = await startService(t)
    assertProblem(await other.call('GET', '/users', { token }), 401, 'token_invalid')
  })
})
