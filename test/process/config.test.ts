import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'

import { ConfigError, parseConfig } from '../../src/process/config.js'
import { spawnService } from '../helpers/child.js'
import { makeTempDir } from '../helpers/service.js'
import { TEST_SECRET } from '../helpers/tokens.js'

const CWD = path.resolve('/srv/app')
const SECRET_A = 'a-secret-that-is-long-enough-0123456789'
const SECRET_B = 'b-secret-that-is-long-enough-0123456789'

/** Asserts that the environment is refused with a ConfigError that starts with `variable`. */
function assertRefused(env: Record<string, string>, variable: string): ConfigError {
  let caught: unknown
  try {
    parseConfig(env, CWD)
  } catch (error) {
    caught = error
  }
  assert.ok(
    caught instanceof ConfigError,
    `expected a ConfigError for ${JSON.stringify(env)}, got ${String(caught)}`,
  )
  assert.ok(
    caught.message.startsWith(variable),
    `the message should start with ${variable}: ${caught.message}`,
  )
  return caught
}

describe('parseConfig defaults', () => {
  it('gives every variable its documented default when the environment is empty', () => {
    const config = parseConfig({}, CWD)
    assert.equal(config.port, 8080)
    assert.equal(config.host, '127.0.0.1')
    assert.equal(config.dataDir, path.join(CWD, 'data'))
    assert.equal(config.basePath, '')
    assert.equal(config.keys, undefined)
    assert.equal(config.issuer, undefined)
    assert.equal(config.audience, undefined)
    assert.equal(config.leewaySeconds, 30)
    assert.equal(config.logLevel, 'info')
    assert.equal(config.maxInflight, 1000)
    assert.equal(config.maxEventLoopDelayMs, 1000)
    assert.equal(config.headersTimeoutMs, 10_000)
    assert.equal(config.requestTimeoutMs, 30_000)
    assert.equal(config.keepAliveTimeoutMs, 5_000)
    assert.equal(config.shutdownTimeoutMs, 10_000)
    assert.equal(config.production, false)
  })

  it('treats an empty or blank variable as unset', () => {
    const config = parseConfig({ PORT: '', HOST: '  ', LOG_LEVEL: '', MAX_INFLIGHT: ' ' }, CWD)
    assert.equal(config.port, 8080)
    assert.equal(config.host, '127.0.0.1')
    assert.equal(config.logLevel, 'info')
    assert.equal(config.maxInflight, 1000)
  })

  it('returns a frozen object', () => {
    const config = parseConfig({ PORT: '9000' }, CWD)
    assert.ok(Object.isFrozen(config))
    assert.throws(
      () => {
        Object.assign(config, { port: 1 })
      },
      { name: 'TypeError', message: /^Cannot assign to read only property 'port'/ },
    )
    assert.equal(config.port, 9000)
  })
})

describe('parseConfig accepted values', () => {
  it('reads every variable it knows', () => {
    const config = parseConfig(
      {
        PORT: '0',
        HOST: '0.0.0.0',
        DATA_DIR: '/var/lib/users',
        BASE_PATH: '/api/v2',
        JWT_SECRET: SECRET_A,
        JWT_ISSUER: 'https://issuer.example',
        JWT_AUDIENCE: 'users-api',
        JWT_LEEWAY_S: '0',
        LOG_LEVEL: 'debug',
        MAX_INFLIGHT: '5',
        MAX_EVENT_LOOP_DELAY_MS: '250',
        HEADERS_TIMEOUT_MS: '1000',
        REQUEST_TIMEOUT_MS: '2000',
        KEEP_ALIVE_TIMEOUT_MS: '3000',
        SHUTDOWN_TIMEOUT_MS: '0',
        NODE_ENV: 'production',
      },
      CWD,
    )
    assert.equal(config.port, 0)
    assert.equal(config.host, '0.0.0.0')
    assert.equal(config.dataDir, path.resolve('/var/lib/users'))
    assert.equal(config.basePath, '/api/v2')
    assert.ok(config.keys !== undefined)
    assert.deepEqual(
      config.keys.keys.map((key) => key.secret.toString()),
      [SECRET_A],
    )
    assert.equal(config.keys.byKid, false)
    assert.equal(config.issuer, 'https://issuer.example')
    assert.equal(config.audience, 'users-api')
    assert.equal(config.leewaySeconds, 0)
    assert.equal(config.logLevel, 'debug')
    assert.equal(config.maxInflight, 5)
    assert.equal(config.maxEventLoopDelayMs, 250)
    assert.equal(config.headersTimeoutMs, 1000)
    assert.equal(config.requestTimeoutMs, 2000)
    assert.equal(config.keepAliveTimeoutMs, 3000)
    assert.equal(config.shutdownTimeoutMs, 0)
    assert.equal(config.production, true)
  })

  it('resolves a relative DATA_DIR against the working directory', () => {
    assert.equal(
      parseConfig({ DATA_DIR: 'state/users' }, CWD).dataDir,
      path.join(CWD, 'state', 'users'),
    )
    assert.equal(
      parseConfig({ DATA_DIR: './data' }, '/tmp/other').dataDir,
      path.resolve('/tmp/other/data'),
    )
  })

  it('trims a trailing slash from BASE_PATH and reads "/" as no base path', () => {
    assert.equal(parseConfig({ BASE_PATH: '/v1/' }, CWD).basePath, '/v1')
    assert.equal(parseConfig({ BASE_PATH: '/' }, CWD).basePath, '')
  })

  it('accepts IPv4, IPv6 and host names for HOST', () => {
    for (const host of ['::1', '::', '192.168.1.10', 'localhost', 'users.internal.example']) {
      assert.equal(parseConfig({ HOST: host }, CWD).host, host)
    }
  })

  it('accepts every log level', () => {
    for (const level of ['debug', 'info', 'warn', 'error', 'silent']) {
      assert.equal(parseConfig({ LOG_LEVEL: level }, CWD).logLevel, level)
    }
  })

  it('reads JWT_SECRETS as kid=secret pairs, in order, and decodes base64url: secrets', () => {
    const raw = Buffer.alloc(32, 7)
    const config = parseConfig(
      {
        JWT_SECRETS: `new=${SECRET_A}, old=base64url:${raw.toString('base64url')}`,
        JWT_SECRET: SECRET_B,
      },
      CWD,
    )
    assert.ok(config.keys !== undefined)
    assert.equal(config.keys.byKid, true)
    assert.deepEqual(
      config.keys.keys.map((key) => key.kid),
      ['new', 'old'],
    )
    assert.equal(config.keys.keys[0]?.secret.toString(), SECRET_A)
    assert.deepEqual(config.keys.keys[1]?.secret, raw)
  })
})

describe('parseConfig refusals', () => {
  const cases: readonly [string, string][] = [
    ['PORT', 'not-a-port'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['PORT', '80.5'],
    ['HOST', 'not a host!'],
    ['BASE_PATH', 'not a path'],
    ['BASE_PATH', 'v1'],
    ['BASE_PATH', '/v1//users'],
    ['BASE_PATH', '/v1?x=1'],
    // Dot segments: clients resolve them away, so the API would be reachable only with --path-as-is.
    ['BASE_PATH', '/..'],
    ['BASE_PATH', '/.'],
    ['BASE_PATH', '/api/../v1/'],
    ['JWT_LEEWAY_S', 'abc'],
    ['JWT_LEEWAY_S', '-1'],
    ['LOG_LEVEL', 'loudest'],
    ['MAX_INFLIGHT', 'lots'],
    ['MAX_INFLIGHT', '-3'],
    ['MAX_INFLIGHT', '0'],
    ['MAX_EVENT_LOOP_DELAY_MS', 'soon'],
    ['MAX_EVENT_LOOP_DELAY_MS', '0'],
    ['HEADERS_TIMEOUT_MS', '0'],
    ['REQUEST_TIMEOUT_MS', '1e3'],
    ['KEEP_ALIVE_TIMEOUT_MS', 'forever'],
    ['SHUTDOWN_TIMEOUT_MS', '-5'],
  ]
  for (const [variable, value] of cases) {
    it(`refuses ${variable}=${JSON.stringify(value)} naming ${variable}`, () => {
      assertRefused({ [variable]: value }, variable)
    })
  }

  it('refuses JWT_SECRETS with an entry without "=", naming JWT_SECRETS', () => {
    assertRefused({ JWT_SECRETS: SECRET_A }, 'JWT_SECRETS')
    assertRefused({ JWT_SECRETS: `one=${SECRET_A},${SECRET_B}` }, 'JWT_SECRETS')
  })

  it('refuses JWT_SECRETS with a repeated or malformed kid', () => {
    assertRefused({ JWT_SECRETS: `k=${SECRET_A},k=${SECRET_B}` }, 'JWT_SECRETS')
    assertRefused({ JWT_SECRETS: `bad kid=${SECRET_A}` }, 'JWT_SECRETS')
  })

  it('refuses a secret shorter than 32 bytes without showing it', () => {
    const short = 'short-secret-31-bytes-long-xxxx'
    assert.equal(Buffer.byteLength(short), 31)
    const single = assertRefused({ JWT_SECRET: short }, 'JWT_SECRET')
    assert.ok(!single.message.includes(short), single.message)
    const listed = assertRefused({ JWT_SECRETS: `k1=${SECRET_A},k2=${short}` }, 'JWT_SECRETS')
    assert.ok(!listed.message.includes(short), listed.message)
    assertRefused(
      { JWT_SECRET: `base64url:${Buffer.alloc(31).toString('base64url')}` },
      'JWT_SECRET',
    )
    assertRefused({ JWT_SECRET: 'base64url:not base64!' }, 'JWT_SECRET')
  })
})

describe('a bad variable at process start', () => {
  const cases: readonly [string, string][] = [
    ['PORT', '70000'],
    ['MAX_INFLIGHT', 'lots'],
    ['BASE_PATH', 'v1'],
  ]
  for (const [variable, value] of cases) {
    it(`exits non-zero naming ${variable} and never listens (${variable}=${value})`, async (t) => {
      const dataDir = path.join(await makeTempDir(t), 'data')
      const child = spawnService({ dataDir, env: { [variable]: value } })
      const timer = setTimeout(() => child.proc.kill('SIGKILL'), 15_000)
      const { code } = await child.exited
      clearTimeout(timer)
      assert.notEqual(code, 0)
      assert.notEqual(code, null, 'the process should exit by itself')
      assert.match(child.stderr(), new RegExp(`\\b${variable}\\b`))
      assert.doesNotMatch(child.stdout(), /"msg":"listening"/)
      assert.ok(!child.stderr().includes(TEST_SECRET), 'the secret must not be printed')
    })
  }
})

describe('parseConfig: the PostgreSQL sessions and the feed stall report', () => {
  it('defaults to 30 s, 10 s and 5 s, and reads each (0 turns a time-out off)', () => {
    const defaults = parseConfig({}, CWD)
    assert.equal(defaults.databaseStatementTimeoutMs, 30_000)
    assert.equal(defaults.databaseIdleInTransactionTimeoutMs, 10_000)
    assert.equal(defaults.feedStallWarnMs, 5_000)
    const set = parseConfig(
      {
        DATABASE_STATEMENT_TIMEOUT_MS: '0',
        DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: '2500',
        FEED_STALL_WARN_MS: '750',
      },
      CWD,
    )
    assert.equal(set.databaseStatementTimeoutMs, 0)
    assert.equal(set.databaseIdleInTransactionTimeoutMs, 2500)
    assert.equal(set.feedStallWarnMs, 750)
  })

  const cases: readonly [string, string][] = [
    ['DATABASE_STATEMENT_TIMEOUT_MS', '-1'],
    ['DATABASE_STATEMENT_TIMEOUT_MS', '30s'],
    ['DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS', '1.5'],
    ['DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS', '86400001'],
    ['FEED_STALL_WARN_MS', '0'],
    ['FEED_STALL_WARN_MS', 'soon'],
  ]
  for (const [variable, value] of cases) {
    it(`refuses ${variable}=${JSON.stringify(value)} naming ${variable}`, () => {
      assertRefused({ [variable]: value }, variable)
    })
  }
})
