import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import path from 'node:path'
import { type Readable, Writable } from 'node:stream'
import { describe, it } from 'node:test'

import {
  createJsonLogger,
  describeError,
  type LogLevel,
  silentLogger,
} from '../../src/log/logger.js'
import type { RequestLogEntry } from '../../src/log/request-line.js'
import { PROJECT_ROOT, startChild } from '../helpers/child.js'
import { helperScript } from '../helpers/child-scripts.js'
import { request } from '../helpers/http.js'
import type { ClosedPipeReport, SlowReaderReport } from '../helpers/log-child.js'
import { waitFor } from '../helpers/ops.js'
import { makeTempDir, startService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const FIXED = new Date('2026-11-21T13:47:00.000Z')

function capture(level?: LogLevel): {
  lines: string[]
  logger: ReturnType<typeof createJsonLogger>
} {
  const lines: string[] = []
  const logger = createJsonLogger({
    ...(level === undefined ? {} : { level }),
    write: (line) => {
      lines.push(line)
    },
    now: () => FIXED,
  })
  return { lines, logger }
}

function parseLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const parsed: unknown = JSON.parse(line)
      assert.ok(typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed), line)
      return parsed as Record<string, unknown>
    })
}

type WriteCallback = (error?: Error | null) => void

/** A Writable whose writes complete only when the test releases them, oldest first. */
class HeldStream extends Writable {
  readonly chunks: string[] = []
  readonly #callbacks: WriteCallback[] = []

  constructor(highWaterMark = 16 * 1024) {
    super({ highWaterMark })
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: WriteCallback): void {
    this.chunks.push(chunk.toString('utf8'))
    this.#callbacks.push(callback)
    this.emit('chunk')
  }

  release(): void {
    this.#callbacks.shift()?.()
  }

  /** Resolves once the stream has been handed at least `count` chunks. */
  received(count: number): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (this.chunks.length < count) return
        this.off('chunk', check)
        resolve()
      }
      this.on('chunk', check)
      check()
    })
  }
}

/** A Writable that fails every write as a pipe whose reader has gone does. */
class ClosedPipeStream extends Writable {
  override _write(_chunk: Buffer, _encoding: BufferEncoding, callback: WriteCallback): void {
    callback(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }))
  }
}

/** Lets the event loop go round: anything the logger scheduled has had its chance to run. */
async function turns(count: number): Promise<void> {
  for (let i = 0; i < count; i += 1)
    await new Promise((resolve) => {
      setImmediate(resolve)
    })
}

/** A plain listener on purpose: events.once would add an 'error' listener of its own. */
function closed(stream: Writable): Promise<void> {
  return new Promise((resolve) => {
    stream.on('close', resolve)
  })
}

/** The same lines as a stream logger writes, from a logger with the `write` option. */
function expectedLines(from: number, to: number): string {
  const { lines, logger } = capture()
  for (let n = from; n < to; n += 1) logNumbered(logger, n)
  return lines.join('')
}

/** Lines of one length whatever n is, so that byte counts are line counts. */
function logNumbered(logger: ReturnType<typeof createJsonLogger>, n: number): void {
  logger.info('line', { n: String(n).padStart(4, '0') })
}

const LINE_BYTES = Buffer.byteLength(expectedLines(0, 1))

const LOG_CHILD = helperScript('log-child')

interface LogChild {
  readonly proc: ChildProcess
  readonly stdout: Readable
  stderr(): string
  /** The first line on stderr: the child's report. */
  readonly report: Promise<string>
  readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Runs test/helpers/log-child.ts (compiled); its stdout is left unread for the test to consume. */
function spawnLogChild(
  ...args: ['closed-pipe' | 'slow-reader'] | ['crash' | 'exit', string]
): LogChild {
  const env: Record<string, string | undefined> = { ...process.env }
  delete env['NODE_TEST_CONTEXT']
  const proc = spawn(process.execPath, [LOG_CHILD, ...args], {
    cwd: PROJECT_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const { stdout, stderr } = proc
  if (stdout === null || stderr === null) throw new Error('the child has no stdout or stderr pipe')
  let err = ''
  const report = new Promise<string>((resolve) => {
    stderr.setEncoding('utf8').on('data', (chunk: string) => {
      err += chunk
      const end = err.indexOf('\n')
      if (end >= 0) resolve(err.slice(0, end))
    })
  })
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.on('close', (code, signal) => {
      resolve({ code, signal })
    })
  })
  return { proc, stdout, stderr: () => err, report, closed }
}

function firstLine(stream: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = ''
    stream.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk
      const end = text.indexOf('\n')
      if (end >= 0) resolve(text.slice(0, end))
    })
    stream.on('end', () => {
      reject(new Error(`stdout ended before a whole line: ${text}`))
    })
  })
}

function readAll(stream: Readable): Promise<string> {
  return new Promise((resolve) => {
    let text = ''
    stream.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk
    })
    stream.on('end', () => {
      resolve(text)
    })
  })
}

const ENTRY: RequestLogEntry = {
  requestId: 'r',
  method: 'GET',
  path: '/',
  status: 200,
  durationMs: 1,
  sub: 'u',
}

/** What `info('request', entry)` wrote before request() existed. */
function stringifyRequest(entry: RequestLogEntry): string {
  return `${JSON.stringify({ time: FIXED.toISOString(), level: 'info', msg: 'request', ...entry })}\n`
}

/** Only the fields JSON.stringify keeps: the object a request line parses back to. */
function definedFields(entry: RequestLogEntry): Record<string, unknown> {
  return Object.fromEntries(Object.entries(entry).filter(([, value]) => value !== undefined))
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
      time: '2026-11-21T13:47:00.000Z',
      level: 'info',
      msg: 'request',
      requestId: 'abc',
      status: 200,
    })
  })

  it('keeps a message with a newline on one line', () => {
    const { lines, logger } = capture()
    logger.warn('two\nlines', { detail: 'a\nb' })
    assert.equal(lines.length, 1)
    assert.equal((lines[0] ?? '').split('\n').length, 2)
    assert.deepEqual(
      parseLines(lines.join('')).map((entry) => entry['msg']),
      ['two\nlines'],
    )
  })

  it('drops lines below the level (info by default)', () => {
    const { lines, logger } = capture()
    logger.debug('hidden')
    logger.info('shown')
    logger.warn('shown')
    logger.error('shown')
    assert.deepEqual(
      parseLines(lines.join('')).map((entry) => entry['level']),
      ['info', 'warn', 'error'],
    )
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

  it('writes always() lines at info whatever the level, even silent', () => {
    const { lines, logger } = capture('silent')
    logger.info('hidden')
    logger.always('listening', { url: 'http://127.0.0.1:8080' })
    assert.deepEqual(parseLines(lines.join('')), [
      { time: FIXED.toISOString(), level: 'info', msg: 'listening', url: 'http://127.0.0.1:8080' },
    ])
  })

  it('formats the time of each line from the clock, also when it stands still or runs back', () => {
    const times = [
      '2026-11-21T13:47:00.000Z',
      '2026-11-21T13:47:00.000Z',
      '2026-11-21T13:47:00.001Z',
      '2026-11-21T13:46:59.999Z',
      '2026-11-21T13:47:00.001Z',
      '2027-01-01T00:00:00.000Z',
    ]
    let next = 0
    const lines: string[] = []
    const logger = createJsonLogger({
      write: (line) => {
        lines.push(line)
      },
      now: () => new Date(times[next++] ?? 0),
    })
    for (let i = 0; i < times.length; i += 1) {
      if (i % 2 === 0) logger.info('tick')
      else logger.request({ ...ENTRY, sub: undefined })
    }
    assert.deepEqual(
      parseLines(lines.join('')).map((entry) => entry['time']),
      times,
    )
  })

  it('never throws for fields JSON cannot hold: it keeps the message and says why', () => {
    const { lines, logger } = capture()
    const cycle: Record<string, unknown> = {}
    cycle['self'] = cycle
    assert.doesNotThrow(() => {
      logger.warn('big', { n: 10n })
    })
    assert.doesNotThrow(() => {
      logger.error('loop', { cycle })
    })
    const entries = parseLines(lines.join(''))
    assert.deepEqual(
      entries.map((entry) => [entry['level'], entry['msg']]),
      [
        ['warn', 'big'],
        ['error', 'loop'],
      ],
    )
    for (const entry of entries) {
      assert.match(String(entry['logError']), /^fields not serializable: /)
    }
    assert.equal(logger.dropped, 0)
  })

  it('counts a line whose write function throws as dropped, and does not throw', () => {
    const logger = createJsonLogger({
      write: () => {
        throw new Error('full')
      },
    })
    assert.doesNotThrow(() => {
      logger.info('lost')
    })
    assert.equal(logger.dropped, 1)
  })

  it('refuses bad options when built', () => {
    const stream = new HeldStream()
    const unknown: string = 'loud'
    assert.throws(() => createJsonLogger({ level: unknown as LogLevel }), /unknown level "loud"/)
    for (const maxBufferBytes of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => createJsonLogger({ stream, maxBufferBytes }), /maxBufferBytes/)
    }
    assert.throws(() => createJsonLogger({ stream, write: () => {} }), /write or stream, not both/)
  })
})

describe('createJsonLogger: request()', () => {
  const TRICKY = [
    'plain',
    '',
    'say "hi"',
    'back\\slash',
    'new\nline',
    'tab\there',
    'cr\rlf',
    'nul\u0000',
    'unit\u001f',
    'del\u007f',
    'line\u2028sep\u2029',
    'emoji 😀',
    'lone \ud800 high',
    'lone \udc00 low',
    'end \ud83d',
    '</script>',
    'é ü 中文',
    '\\"\\n',
  ]

  it('writes the line byte for byte as info("request", entry) does, also for strings to escape', () => {
    for (const value of TRICKY) {
      const entries: RequestLogEntry[] = [
        {
          requestId: value,
          method: value,
          path: value,
          status: 200,
          durationMs: 1.25,
          sub: value,
          traceId: value,
        },
        { ...ENTRY, requestId: value, path: `/users/${value}`, status: 404, sub: undefined },
        { ...ENTRY, method: 'PUT', status: 201, sub: value, traceId: undefined },
      ]
      for (const entry of entries) {
        const { lines, logger } = capture()
        logger.request(entry)
        logger.info('request', { ...entry })
        const expected = stringifyRequest(entry)
        assert.equal(lines[0], expected, `value ${JSON.stringify(value)}`)
        assert.equal(lines[1], expected)
        assert.deepEqual(JSON.parse(lines[0] ?? ''), {
          time: FIXED.toISOString(),
          level: 'info',
          msg: 'request',
          ...definedFields(entry),
        })
      }
    }
  })

  it('writes numbers as JSON.stringify does (null for NaN and Infinity)', () => {
    const numbers = [0, -0, 0.1 + 0.2, 5e-7, 1e21, 123.456, Number.NaN, Number.POSITIVE_INFINITY]
    for (const durationMs of numbers) {
      const entry: RequestLogEntry = { ...ENTRY, status: 499, durationMs }
      const { lines, logger } = capture()
      logger.request(entry)
      assert.equal(lines[0], stringifyRequest(entry))
    }
  })

  it('is an info line: nothing is written at warn', () => {
    const entry = ENTRY
    const quiet = capture('warn')
    quiet.logger.request(entry)
    assert.deepEqual(quiet.lines, [])
    const chatty = capture('debug')
    chatty.logger.request(entry)
    assert.equal(chatty.lines.length, 1)
  })
})

describe('createJsonLogger with a stream', () => {
  it('hands lines over in batches, one write per turn of the event loop, in order', async () => {
    const stream = new HeldStream()
    const logger = createJsonLogger({ stream, now: () => FIXED })
    for (let n = 0; n < 100; n += 1) logNumbered(logger, n)
    assert.equal(stream.chunks.length, 0, 'a log call does not write')
    await stream.received(1)
    stream.release()
    for (let n = 100; n < 150; n += 1) logNumbered(logger, n)
    await stream.received(2)
    stream.release()
    await logger.flush()
    assert.deepEqual(stream.chunks, [expectedLines(0, 100), expectedLines(100, 150)])
    assert.equal(logger.dropped, 0)
  })

  it('holds at most maxBufferBytes (queue plus stream buffer) and counts each line refused', async () => {
    const stream = new HeldStream()
    const maxBufferBytes = 10 * LINE_BYTES + Math.floor(LINE_BYTES / 2)
    const logger = createJsonLogger({ stream, now: () => FIXED, maxBufferBytes })
    let logged = 0
    let releasedBytes = 0
    const log = (count: number): void => {
      for (let i = 0; i < count; i += 1) {
        logNumbered(logger, logged)
        logged += 1
        const held = (logged - logger.dropped) * LINE_BYTES - releasedBytes
        assert.ok(held <= maxBufferBytes, `held ${held} bytes after line ${logged}`)
        assert.ok(stream.writableLength <= maxBufferBytes)
      }
    }
    log(25)
    assert.equal(logger.dropped, 15, 'ten lines fit, the fifteen after them do not')
    await stream.received(1)
    assert.equal(stream.writableLength, 10 * LINE_BYTES, 'the batch now waits in the stream buffer')
    log(5)
    assert.equal(logger.dropped, 20, 'the stream buffer counts against the bound')
    stream.release()
    releasedBytes += 10 * LINE_BYTES
    log(3)
    assert.equal(logger.dropped, 20, 'room again once the stream has written')
    await stream.received(2)
    stream.release()
    await logger.flush()
    assert.deepEqual(stream.chunks, [expectedLines(0, 10), expectedLines(30, 33)])
  })

  it('waits for drain while the stream pushes back, then writes the queue as one batch', async () => {
    const stream = new HeldStream(64)
    const logger = createJsonLogger({ stream, now: () => FIXED })
    for (let n = 0; n < 3; n += 1) logNumbered(logger, n)
    await stream.received(1)
    assert.ok(stream.writableNeedDrain, 'the stream pushes back')
    for (let n = 3; n < 10; n += 1) logNumbered(logger, n)
    let flushed = false
    const flushing = logger.flush().then(() => {
      flushed = true
    })
    await turns(5)
    assert.equal(
      stream.writableLength,
      3 * LINE_BYTES,
      'no second batch while the stream pushes back',
    )
    stream.release()
    await stream.received(2)
    assert.equal(stream.chunks[1], expectedLines(3, 10))
    await turns(5)
    assert.equal(flushed, false, 'flush() waits for the lines queued when it was called')
    stream.release()
    await flushing
    assert.equal(stream.writableLength, 0)
    assert.equal(logger.dropped, 0)
  })

  it('resolves flush() once the stream has written every line, and at once when idle', async () => {
    const stream = new HeldStream()
    const logger = createJsonLogger({ stream, now: () => FIXED })
    await logger.flush()
    for (let n = 0; n < 3; n += 1) logNumbered(logger, n)
    let flushed = false
    const flushing = logger.flush().then(() => {
      flushed = true
    })
    assert.equal(stream.chunks.length, 1, 'flush() hands the queue over at once')
    await turns(5)
    assert.equal(flushed, false)
    stream.release()
    await flushing
    assert.deepEqual(stream.chunks, [expectedLines(0, 3)])
  })

  it('writes at most once per minWriteIntervalMs while busy, and at once after a quiet spell', async () => {
    const stream = new HeldStream()
    const intervalMs = 400
    const logger = createJsonLogger({ stream, now: () => FIXED, minWriteIntervalMs: intervalMs })
    // Taken before the first write: the second may not come sooner than the interval after it.
    const beforeFirst = performance.now()
    logNumbered(logger, 0)
    await turns(1)
    assert.equal(stream.chunks.length, 1, 'the first line goes out in the next turn')
    stream.release()
    for (let n = 1; n < 4; n += 1) {
      logNumbered(logger, n)
      await turns(1)
    }
    assert.equal(stream.chunks.length, 1, 'lines of later turns wait for the interval')
    await stream.received(2)
    assert.ok(performance.now() - beforeFirst >= intervalMs, 'not before the interval passed')
    assert.equal(stream.chunks[1], expectedLines(1, 4), 'the lines of three turns in one write')
    stream.release()
    await new Promise((resolve) => setTimeout(resolve, intervalMs + 50))
    logNumbered(logger, 4)
    await turns(1)
    assert.equal(stream.chunks.length, 3, 'a quiet spell as long as the interval: the next turn')
    stream.release()
    logNumbered(logger, 5)
    const flushing = logger.flush()
    assert.equal(stream.chunks.length, 4, 'flush() does not wait for the interval')
    stream.release()
    await flushing
    assert.deepEqual(stream.chunks.slice(2), [expectedLines(4, 5), expectedLines(5, 6)])
    assert.equal(logger.dropped, 0)
  })

  it('never writes sooner than minWriteIntervalMs after the last write, though timers round', async () => {
    // Node counts a timer in whole ms of a clock it truncates: one set for the fractional rest of
    // an interval fired up to 1.5 ms early, nearly every time.
    const intervalMs = 10
    const times: number[] = []
    const stream = new Writable({
      write(_chunk, _encoding, callback) {
        times.push(performance.now())
        callback()
      },
    })
    const logger = createJsonLogger({ stream, now: () => FIXED, minWriteIntervalMs: intervalMs })
    const end = performance.now() + 500
    while (performance.now() < end) {
      logNumbered(logger, 0)
      await turns(1)
    }
    const gaps = times.slice(1).map((at, i) => at - (times[i] ?? at))
    assert.ok(gaps.length >= 10, `only ${gaps.length + 1} writes`)
    // The stream sees a write a few µs after the sink timed it, or later when the process is
    // descheduled in between (a loaded machine): the gap after such a write looks short by as
    // much. A write is early only if it is so against each of the (up to) three before it, k
    // writes before counting k intervals: the timers' rounding makes nearly every one early.
    const slack = 0.05
    const early = gaps.filter((_, i) =>
      [1, 2, 3]
        .filter((k) => i + 1 - k >= 0)
        .every((k) => (times[i + 1] ?? 0) - (times[i + 1 - k] ?? 0) < k * intervalMs - slack),
    )
    assert.deepEqual(early, [], `${early.length} of ${gaps.length} writes came early`)
  })

  it('refuses a minWriteIntervalMs that is not a number of ms', () => {
    for (const minWriteIntervalMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(
        () => createJsonLogger({ stream: new HeldStream(), minWriteIntervalMs }),
        /minWriteIntervalMs is not a number of ms/,
      )
    }
  })
})

describe('createJsonLogger with a broken stream', () => {
  it('survives an error on the stream and drops, counting, every line after it', async () => {
    const stream = new HeldStream()
    const logger = createJsonLogger({ stream, now: () => FIXED })
    logNumbered(logger, 0)
    await stream.received(1)
    const flushing = logger.flush()
    logNumbered(logger, 1)
    logNumbered(logger, 2)
    const gone = closed(stream)
    stream.destroy(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }))
    await flushing
    await gone
    for (let n = 3; n < 13; n += 1)
      assert.doesNotThrow(() => {
        logNumbered(logger, n)
      })
    assert.equal(logger.dropped, 12, 'the two queued when it broke and the ten after')
    await logger.flush()
    assert.deepEqual(stream.chunks, [expectedLines(0, 1)])
  })

  it('stops at an error event even when the stream still looks writable', async () => {
    const stream = new HeldStream()
    const logger = createJsonLogger({ stream, now: () => FIXED })
    stream.emit('error', Object.assign(new Error('write EBADF'), { code: 'EBADF' }))
    for (let n = 0; n < 5; n += 1) logNumbered(logger, n)
    assert.equal(logger.dropped, 5)
    await logger.flush()
    await turns(3)
    assert.deepEqual(stream.chunks, [])
  })

  it('drops and counts every line once the stream is destroyed without an error', async () => {
    const stream = new HeldStream()
    const logger = createJsonLogger({ stream, now: () => FIXED })
    const gone = closed(stream)
    stream.destroy()
    for (let n = 0; n < 4; n += 1)
      assert.doesNotThrow(() => {
        logNumbered(logger, n)
      })
    assert.equal(logger.dropped, 4)
    await logger.flush()
    await gone
    assert.deepEqual(stream.chunks, [])
  })

  it('survives a write that fails with EPIPE, as a pipe whose reader has gone', async () => {
    const stream = new ClosedPipeStream()
    const logger = createJsonLogger({ stream, now: () => FIXED })
    const gone = closed(stream)
    logNumbered(logger, 0)
    await gone
    for (let n = 1; n < 6; n += 1) logNumbered(logger, n)
    assert.equal(logger.dropped, 5)
    await logger.flush()
  })
})

describe('createJsonLogger on the stdout of a process', () => {
  it('survives a reader that closes the pipe (EPIPE): keeps logging, counts the drops, exits 0', {
    timeout: 60_000,
  }, async (t) => {
    const child = spawnLogChild('closed-pipe')
    t.after(() => {
      child.proc.kill('SIGKILL')
    })
    const first = await firstLine(child.stdout)
    child.stdout.destroy()
    assert.equal(JSON.parse(first).msg, 'ready')
    const { code, signal } = await child.closed
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, child.stderr())
    assert.doesNotMatch(child.stderr(), /EPIPE|Error/)
    const report = JSON.parse(await child.report) as ClosedPipeReport
    assert.equal(report.timedOut, false, 'the child dropped a line once the pipe was closed')
    assert.equal(
      report.droppedAfterBreak,
      report.afterBreak,
      'every line after the break is counted',
    )
    assert.ok(report.dropped > report.afterBreak)
  })

  it('holds no more than the bound for a reader that does not read, and loses only what it counts', {
    timeout: 60_000,
  }, async (t) => {
    const child = spawnLogChild('slow-reader')
    t.after(() => {
      child.proc.kill('SIGKILL')
    })
    // stdout stays unread until the child has reported: the pipe fills and stays full.
    const report = JSON.parse(await child.report) as SlowReaderReport
    const text = await readAll(child.stdout)
    const { code, signal } = await child.closed
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, child.stderr())
    assert.ok(report.dropped > 0, 'lines were dropped')
    assert.ok(report.maxHeldBytes <= report.maxBufferBytes, `held ${report.maxHeldBytes} bytes`)
    assert.ok(report.maxHeldBytes > report.maxBufferBytes - report.lineBytes, 'bound reached')
    assert.ok(report.maxWritableLength > 0, 'the stream itself buffered too')
    const numbers = parseLines(text).map((entry) => entry['n'])
    assert.equal(numbers.length, report.logged - report.dropped, 'every line not dropped arrived')
    for (let i = 1; i < numbers.length; i += 1) {
      assert.ok(Number(numbers[i]) > Number(numbers[i - 1]), 'in order')
    }
  })
})

describe('flushOnExit', () => {
  const BURST = 200
  for (const [how, code] of [
    ['crash', 1],
    ['exit', 3],
  ] as const) {
    it(`writes the lines still queued when the process ends by ${how === 'crash' ? 'an uncaught exception' : 'process.exit()'}`, {
      timeout: 60_000,
    }, async (t) => {
      const child = spawnLogChild(how, String(BURST))
      t.after(() => {
        child.proc.kill('SIGKILL')
      })
      const text = await readAll(child.stdout)
      const { code: exitCode, signal } = await child.closed
      assert.deepEqual({ code: exitCode, signal }, { code, signal: null }, child.stderr())
      if (how === 'crash') assert.match(child.stderr(), /the crash of log-child\.ts/)
      const entries = parseLines(text)
      assert.equal(entries[0]?.['msg'], 'ready')
      assert.deepEqual(
        entries.slice(1).map((entry) => [entry['msg'], entry['n']]),
        Array.from({ length: BURST }, (_, n) => ['burst', n]),
      )
    })
  }
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
    const logger = createJsonLogger({
      level: 'info',
      write: (line) => {
        lines.push(line)
      },
    })
    const s = await startService(t, { logger })
    const token = makeToken({ sub: 'log-reader', scope: 'users:read' })
    const res = await request('GET', `${s.baseUrl}/users?limit=1`, {
      token,
      headers: { 'x-request-id': 'req-123' },
    })
    assert.equal(res.status, 200)
    const entry = await waitFor('the request line', () =>
      parseLines(lines.join('')).find(
        (line) => line['msg'] === 'request' && line['requestId'] === 'req-123',
      ),
    )
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
    const logger = createJsonLogger({
      write: (line) => {
        lines.push(line)
      },
    })
    const s = await startService(t, { logger })
    const token = `${makeToken()}x`
    const res = await request('GET', `${s.baseUrl}/users`, {
      token,
      headers: { 'x-request-id': 'bad-token' },
    })
    assert.equal(res.status, 401)
    const entry = await waitFor('the request line', () =>
      parseLines(lines.join('')).find((line) => line['requestId'] === 'bad-token'),
    )
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
      token: makeToken({ sub: 'proc-reader' }),
      headers: { 'x-request-id': 'proc-1' },
    })
    assert.equal(res.status, 200)
    const entry = await waitFor('the request line', () =>
      parseLines(child.stdout()).find((line) => line['requestId'] === 'proc-1'),
    )
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
    const res = await request('GET', `${child.url}/healthz`, {
      headers: { 'x-request-id': 'quiet-1' },
    })
    assert.equal(res.status, 200)
    const { code } = await child.stop()
    assert.equal(code, 0)
    const lines = parseLines(child.stdout())
    assert.equal(lines.filter((line) => line['msg'] === 'listening').length, 1)
    assert.deepEqual(
      lines.filter((line) => line['msg'] === 'request'),
      [],
    )
  })
})
