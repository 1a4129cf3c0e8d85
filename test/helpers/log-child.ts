/**
 * A child for the logger tests: `node --import tsx log-child.ts MODE` logs through
 * createJsonLogger() to its real stdout, writes one JSON report line on stderr and exits 0.
 * - `closed-pipe`: logs `ready`, keeps logging until a line is dropped (the parent has closed its
 *   end of the pipe: process.stdout is never destroyed, it only emits EPIPE errors), then logs
 *   AFTER_BREAK more lines.
 * - `slow-reader`: logs bursts into a pipe the parent does not read, until many lines were
 *   dropped and the stream has buffered, measuring after every line the bytes held (accepted, not
 *   yet in the pipe); then waits for flush().
 * - `crash N` and `exit N`: with flushOnExit, logs `ready`, then in a later turn N lines `burst`
 *   (n from 0) that wait for the sink's next write, and in the same turn throws (an uncaught
 *   exception: exit code 1) or calls process.exit(3). Reports nothing: the parent reads stdout.
 * Gives up after DEADLINE_MS and reports what it saw, so that the parent's assertions fail.
 * Tests import only its types: importing the module would run it.
 */
import { createJsonLogger, flushOnExit, type Logger } from '../../src/log/logger.js'

const AFTER_BREAK = 100
const SLOW_READER_MAX_BYTES = 64 * 1024
const DEADLINE_MS = 20_000

export interface ClosedPipeReport {
  timedOut: boolean
  linesBeforeDrop: number
  afterBreak: number
  droppedAfterBreak: number
  dropped: number
}

export interface SlowReaderReport {
  logged: number
  dropped: number
  lineBytes: number
  /** The most bytes held at once: accepted lines not yet written to the pipe. */
  maxHeldBytes: number
  maxWritableLength: number
  maxBufferBytes: number
}

const deadline = Date.now() + DEADLINE_MS
const nextTurn = (): Promise<void> =>
  new Promise((resolve) => {
    setImmediate(resolve)
  })
const report = (value: ClosedPipeReport | SlowReaderReport): void => {
  process.stderr.write(`${JSON.stringify(value)}\n`)
}

async function closedPipe(): Promise<void> {
  const logger = createJsonLogger()
  logger.always('ready')
  let n = 0
  // No 'error' listener of our own here: the logger's must be what keeps the process alive.
  while (logger.dropped === 0 && Date.now() < deadline) {
    logger.info('line', { n })
    n += 1
    await new Promise((resolve) => {
      setTimeout(resolve, 1)
    })
  }
  const before = logger.dropped
  for (let i = 0; i < AFTER_BREAK; i += 1) logger.info('after the break', { i })
  const droppedAfterBreak = logger.dropped - before
  await logger.flush()
  report({
    timedOut: before === 0,
    linesBeforeDrop: n,
    afterBreak: AFTER_BREAK,
    droppedAfterBreak,
    dropped: logger.dropped,
  })
}

async function slowReader(): Promise<void> {
  const logger = createJsonLogger({ maxBufferBytes: SLOW_READER_MAX_BYTES })
  const pad = 'x'.repeat(100)
  const logLine = (target: Logger, n: number): void => {
    target.info('line', { n: String(n).padStart(8, '0'), pad })
  }
  // Every line has this length: the ISO time and n have fixed widths.
  let sample = ''
  logLine(
    createJsonLogger({
      write: (line) => {
        sample = line
      },
    }),
    0,
  )
  const lineBytes = Buffer.byteLength(sample)
  let logged = 0
  let maxHeldBytes = 0
  let maxWritableLength = 0
  // Until the stream has buffered too: lines wait for the sink's write interval meanwhile.
  while ((logger.dropped < 1000 || maxWritableLength === 0) && Date.now() < deadline) {
    for (let i = 0; i < 100; i += 1) {
      logLine(logger, logged)
      logged += 1
      // Accepted but not yet written to the pipe: bytesWritten counts what the stream was handed.
      const { bytesWritten, writableLength } = process.stdout
      const held = (logged - logger.dropped) * lineBytes - bytesWritten + writableLength
      maxHeldBytes = Math.max(maxHeldBytes, held)
      maxWritableLength = Math.max(maxWritableLength, writableLength)
    }
    await nextTurn()
  }
  report({
    logged,
    dropped: logger.dropped,
    lineBytes,
    maxHeldBytes,
    maxWritableLength,
    maxBufferBytes: SLOW_READER_MAX_BYTES,
  })
  await logger.flush()
}

function endAbruptly(how: 'crash' | 'exit', burst: number): void {
  const logger = createJsonLogger()
  flushOnExit(logger)
  logger.always('ready')
  setTimeout(() => {
    for (let n = 0; n < burst; n += 1) logger.info('burst', { n })
    if (how === 'exit') process.exit(3)
    throw new Error('the crash of log-child.ts')
  }, 20)
}

const mode = process.argv[2]
if (mode === 'closed-pipe') await closedPipe()
else if (mode === 'slow-reader') await slowReader()
else if (mode === 'crash' || mode === 'exit') endAbruptly(mode, Number(process.argv[3]))
else throw new Error('usage: log-child.ts closed-pipe|slow-reader|crash N|exit N')
