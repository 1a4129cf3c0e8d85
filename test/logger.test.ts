import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'

import { createJsonLogger, describeError, silentLogger, type LogLevel } from '../src/logger.js'
import { startChild } from './helpers/child.js'
import { request } from './helpers/http.js'
import { waitFor } from './helpers/ops.js'
import { makeTempDir, startService } from './helpers/service.js'
import { makeToken } from './helpers/tokens.js'

const FIXED = new Date('2026-11-21T13:47:00.000Z')

function capture(level?: LogLevel): { lines: string[], logger: ReturnType<typeof createJsonLogger> } {
  const lines: string[] = []
  const logger = createJsonLogger({
    ...(level === undefined ? {} : { level }),
    write: (line) => { lines.push(line) },
    now: () => FIXED,
  })
  return { lines, logger }
}

function parseLines(text: string): Record<string, unknown>[] {
  return text.split('\n').filter((line) => line !== '').map((line) => {
    const parsed: unknown = JSON.parse(line)
    assert.ok(typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed), line)
    return parsed as Record<string, unknown>
  })
}

describe('createJsonLogger', () => {
  it('writes one JSON object per line with time, level, msg and the fields', () => {
    const { lines, logger } = capture()
    logger.info('request', { requestId: 'abc', status: 200 })
    assert.equal(lines.length, 1)
    const line = lines[0] ?? ''
    assert.ok(line.endsWith('\n'))
    assert.equal(line.indexOf('\n'), line.length - 1, 'exactly one line')
    assert.deepEqual(JSON.parse(line), {
      time: '2026-11-21T13:47:00.000Z', level: 'info', msg: 'request', requestId: 'abc', status: 200,
    })
  })

  it('keeps a message with a newline on one line', () => {
    const { lines, logger } = capture()
    logger.warn('two\nlines', { detail: 'a\nb' })
    assert.equal(lines.length, 1)
    assert.equal((lines[0] ?? '').split('\n').length, 2)
    assert.deepEqual(parseLines(lines.join('')).map((entry) => entry['msg']), ['two\nlines'])
  })

  it('drops lines below the level (info by default)', () => {
    const { lines, logger } = capture()
    logger.debug('hidden')
    logger.info('shown')
    logger.warn('shown')
    logger.error('shown')
    assert.deepEqual(parseLines(lines.join('')).map((entry) => entry['level']), ['info', 'warn', 'error'])
  })

  it('writes only warn and error at level warn, everything at debug, nothing at silent', () => {
    const levels = (level: LogLevel): unknown[] => {
      const { lines, logger } = capture(level)
      logger.debug('d')
      logger.info('i')
      logger.warn('w')
      logger.error('e')
      return parseLines(lines.join('')).map((entry) => entry['level'])
    }
    assert.deepEqual(levels('warn'), ['warn', 'error'])
    assert.deepEqual(levels('error'), ['error'])
    assert.deepEqual(levels('debug'), ['debug', 'info', 'warn', 'error'])
    assert.deepEqual(levels('silent'), [])
  })
})

describe('silentLogger', () => {
  it('is frozen and accepts every call', () => {
    assert.ok(Object.isFrozen(silentLogger))
    for (const method of ['debug', 'info', 'warn', 'error'] as const) {
      assert.equal(silentLogger[method]('anything', { a: 1 }), undefined)
    }
  })
})

describe('describeError', () => {
  it('keeps the message and stack of an Error, and the text of anything else', () => {
    const error = new Error('disk full')
    assert.deepEqual(describeError(error), { error: 'disk full', stack: error.stack })
    assert.deepEqual(describeError('plain'), { error: 'plain' })
    assert.deepEqual(describeError(42), { error: '42' })
  })
})

describe('request logs', () => {
  it('logs one line per request with requestId, method, path, status, durationMs and sub', async (t) => {
    const lines: string[] = []
    const logger = createJsonLogger({ level: 'info', write: (line) => { lines.push(line) } })
    const s = await startService(t, { logger })
    const token = makeToken({ sub: 'log-reader', scope: 'users:read' })
    const res = await request('GET', `${s.baseUrl}/users?limit=1`, { token, headers: { 'x-request-id': 'req-123' } })
    assert.equal(res.status, 200)
    const entry = await waitFor('the request line', () => parseLines(lines.join(''))
      .find((line) => line['msg'] === 'request' && line['requestId'] === 'req-123'))
    assert.equal(entry['level'], 'info')
    assert.equal(entry['method'], 'GET')
    assert.equal(entry['path'], '/users')
    assert.equal(entry['status'], 200)
    assert.equal(entry['sub'], 'log-reader')
    assert.equal(typeof entry['durationMs'], 'number')
    assert.match(String(entry['time']), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    assert.ok(!lines.join('').includes(token), 'the token must not be logged')
  })

  it('logs a refused request with its status and no token', async (t) => {
    const lines: string[] = []
    const logger = createJsonLogger({ write: (line) => { lines.push(line) } })
    const s = await startService(t, { logger })
    const token = `${makeToken()}x`
    const res = await request('GET', `${s.baseUrl}/users`, { token, headers: { 'x-request-id': 'bad-token' } })
    assert.equal(res.status, 401)
    const entry = await waitFor('the request line', () => parseLines(lines.join(''))
      .find((line) => line['requestId'] === 'bad-token'))
    assert.equal(entry['status'], 401)
    assert.equal(entry['sub'], undefined)
    assert.ok(!lines.join('').includes(token))
  })
})

describe('logs of the process', () => {
  it('are JSON lines on stdout: the listening line, then one line per request', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    const res = await request('GET', `${child.url}/users`, {
      token: makeToken({ sub: 'proc-reader' }), headers: { 'x-request-id': 'proc-1' },
    })
    assert.equal(res.status, 200)
    const entry = await waitFor('the request line', () => parseLines(child.stdout())
      .find((line) => line['requestId'] === 'proc-1'))
    assert.deepEqual(
      { method: entry['method'], path: entry['path'], status: entry['status'], sub: entry['sub'] },
      { method: 'GET', path: '/users', status: 200, sub: 'proc-reader' },
    )
    const lines = parseLines(child.stdout())
    const listening = lines.find((line) => line['msg'] === 'listening')
    assert.equal(listening?.['url'], child.url)
    assert.match(child.url, /^http:\/\/127\.0\.0\.1:\d+$/)
    const { code } = await child.stop()
    assert.equal(code, 0)
  })

  it('still print the listening line at LOG_LEVEL=error, but no request lines', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const child = await startChild({ dataDir, env: { LOG_LEVEL: 'error' } })
    t.after(() => child.stop('SIGKILL'))
    const res = await request('GET', `${child.url}/healthz`, { headers: { 'x-request-id': 'quiet-1' } })
    assert.equal(res.status, 200)
    const { code } = await child.stop()
    assert.equal(code, 0)
    const lines = parseLines(child.stdout())
    assert.equal(lines.filter((line) => line['msg'] === 'listening').length, 1)
    assert.deepEqual(lines.filter((line) => line['msg'] === 'request'), [])
  })
})
