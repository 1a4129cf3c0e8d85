import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { parseConfig } from '../../src/process/config.js'
import { ConfigError } from '../../src/settings.js'
import {
  parseRetryAfter,
  RETRY_AFTER_CAP_SECONDS,
  retryDelayMs,
} from '../../src/webhooks/retry-schedule.js'

const refused = (env: Record<string, string>, variable: string): void => {
  assert.throws(
    () => parseConfig(env, '/srv'),
    (error: unknown) => error instanceof ConfigError && error.message.startsWith(variable),
    JSON.stringify(env),
  )
}

describe('WEBHOOK_RETRY_SCHEDULE', () => {
  it('defaults to 5s,5m,30m,2h,5h,10h,10h: 8 attempts over about 27.6 h', () => {
    const { webhookRetrySchedule } = parseConfig({}, '/srv')
    assert.deepEqual(
      webhookRetrySchedule,
      [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
    )
    const hours = webhookRetrySchedule.reduce((sum, delay) => sum + delay, 0) / 3_600_000
    assert.ok(hours > 27.5 && hours < 27.7, String(hours))
  })

  it('reads delays in ms, s, m and h, spaces around commas allowed', () => {
    const config = parseConfig({ WEBHOOK_RETRY_SCHEDULE: '1ms, 2s,3m ,4h,24h,86400000ms' }, '/srv')
    assert.deepEqual(
      config.webhookRetrySchedule,
      [1, 2_000, 180_000, 14_400_000, 86_400_000, 86_400_000],
    )
  })

  it('takes 1 to 20 delays', () => {
    const twenty = Array.from({ length: 20 }, () => '1s').join(',')
    assert.equal(
      parseConfig({ WEBHOOK_RETRY_SCHEDULE: twenty }, '/srv').webhookRetrySchedule.length,
      20,
    )
    assert.deepEqual(
      parseConfig({ WEBHOOK_RETRY_SCHEDULE: '10m' }, '/srv').webhookRetrySchedule,
      [600_000],
    )
    refused({ WEBHOOK_RETRY_SCHEDULE: `${twenty},1s` }, 'WEBHOOK_RETRY_SCHEDULE')
    refused({ WEBHOOK_RETRY_SCHEDULE: ',' }, 'WEBHOOK_RETRY_SCHEDULE')
  })

  it('refuses to start on an empty entry, naming it, rather than passing over it', () => {
    for (const text of ['1s,', ',1s', '1s,,2s', '1s, ,2s']) {
      assert.throws(
        () => parseConfig({ WEBHOOK_RETRY_SCHEDULE: text }, '/srv'),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.message.startsWith('WEBHOOK_RETRY_SCHEDULE') &&
          error.message.includes('empty entry'),
        text,
      )
    }
  })

  it('refuses to start on a delay outside 1 ms to 24 h, or not an integer with a unit', () => {
    for (const text of [
      '0ms',
      '0s',
      '25h',
      '1441m',
      '86400001ms',
      '5',
      '5 s',
      '1.5s',
      '-5s',
      '5d',
      '5S',
      's',
      '5s;5m',
      '1e3ms',
    ])
      refused({ WEBHOOK_RETRY_SCHEDULE: text }, 'WEBHOOK_RETRY_SCHEDULE')
  })
})

describe('the other webhook settings', () => {
  it('default to a 15 s time-out, 20 endpoints and no allowed network', () => {
    const config = parseConfig({}, '/srv')
    assert.equal(config.webhookTimeoutMs, 15_000)
    assert.equal(config.webhooksMax, 20)
    assert.deepEqual(config.webhookAllowNetworks, [])
  })

  it('read WEBHOOK_TIMEOUT_MS from 1 to 120000 and WEBHOOKS_MAX from 1 to 1000', () => {
    const config = parseConfig({ WEBHOOK_TIMEOUT_MS: '120000', WEBHOOKS_MAX: '1000' }, '/srv')
    assert.equal(config.webhookTimeoutMs, 120_000)
    assert.equal(config.webhooksMax, 1000)
    assert.equal(parseConfig({ WEBHOOK_TIMEOUT_MS: '1', WEBHOOKS_MAX: '1' }, '/srv').webhooksMax, 1)
    for (const text of ['0', '120001', '1.5', 'x'])
      refused({ WEBHOOK_TIMEOUT_MS: text }, 'WEBHOOK_TIMEOUT_MS')
    for (const text of ['0', '1001', '-1']) refused({ WEBHOOKS_MAX: text }, 'WEBHOOKS_MAX')
  })

  it('read WEBHOOK_ALLOW_NETWORKS as a comma list of CIDR blocks', () => {
    const config = parseConfig(
      { WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8, 10.20.0.0/16,fd00::/8' },
      '/srv',
    )
    assert.deepEqual(config.webhookAllowNetworks, ['127.0.0.0/8', '10.20.0.0/16', 'fd00::/8'])
    for (const text of ['10.0.0.0/33', 'localhost', '10.0.0.0/8,example.com', '::/200'])
      refused({ WEBHOOK_ALLOW_NETWORKS: text }, 'WEBHOOK_ALLOW_NETWORKS')
  })
})

describe('retryDelayMs', () => {
  const schedule = [5_000, 300_000, 1_800_000]

  it('waits the delay after each failed attempt, then none after the last', () => {
    assert.equal(
      retryDelayMs(schedule, 1, () => 0),
      5_000,
    )
    assert.equal(
      retryDelayMs(schedule, 2, () => 0),
      300_000,
    )
    assert.equal(
      retryDelayMs(schedule, 3, () => 0),
      1_800_000,
    )
    assert.equal(
      retryDelayMs(schedule, 4, () => 0),
      undefined,
    )
  })

  it('lengthens each delay by up to 10 % at random, never shortens it', () => {
    assert.equal(
      retryDelayMs(schedule, 1, () => 0.5),
      5_250,
    )
    assert.equal(
      retryDelayMs(schedule, 1, () => 0.999_999),
      5_500,
    )
    const seen = new Set<number>()
    for (let i = 0; i < 200; i += 1) {
      const delay = retryDelayMs(schedule, 2, Math.random) ?? 0
      assert.ok(delay >= 300_000 && delay <= 330_000, String(delay))
      seen.add(delay)
    }
    assert.ok(seen.size > 100, 'the jitter varies')
  })

  it("takes a receiver's Retry-After when it is longer, up to an hour", () => {
    assert.equal(
      retryDelayMs(schedule, 1, () => 0, 60),
      60_000,
    )
    assert.equal(
      retryDelayMs(schedule, 1, () => 0, 2),
      5_000,
    )
    assert.equal(
      retryDelayMs(schedule, 1, () => 0, 86_400),
      RETRY_AFTER_CAP_SECONDS * 1000,
    )
    assert.equal(
      retryDelayMs(schedule, 3, () => 0, 7_200),
      3_600_000,
    )
    assert.equal(
      retryDelayMs([7_200_000], 1, () => 0, 7_200),
      7_200_000,
      'the cap never shortens',
    )
    assert.equal(
      retryDelayMs(schedule, 4, () => 0, 60),
      undefined,
      'the last attempt stays the last',
    )
  })
})

describe('parseRetryAfter', () => {
  it('reads seconds on a 429 or a 503', () => {
    assert.equal(parseRetryAfter(429, '120'), 120)
    assert.equal(parseRetryAfter(503, ' 7 '), 7)
    assert.equal(parseRetryAfter(503, '0'), 0)
  })

  it('ignores it on any other status, as a date, or malformed', () => {
    assert.equal(parseRetryAfter(500, '120'), undefined)
    assert.equal(parseRetryAfter(200, '120'), undefined)
    assert.equal(parseRetryAfter(429, undefined), undefined)
    for (const header of ['Wed, 21 Oct 2015 07:28:00 GMT', '-1', '1.5', '', 'soon', '1 2'])
      assert.equal(parseRetryAfter(503, header), undefined, header)
  })

  it('reads any run of digits, however long, as at most an hour', () => {
    assert.equal(parseRetryAfter(503, '99999999999'), RETRY_AFTER_CAP_SECONDS)
    assert.equal(parseRetryAfter(429, '9'.repeat(400)), RETRY_AFTER_CAP_SECONDS)
    assert.equal(parseRetryAfter(429, '3601'), RETRY_AFTER_CAP_SECONDS)
    assert.equal(parseRetryAfter(503, '000000000000120'), 120)
  })
})
