import { createIsoClock, formatLine, type LogFields } from './json-line.js'
import { createSink, type LineSinkOptions } from './line-sink.js'
import { formatRequestLine, type RequestLogEntry } from './request-line.js'

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

/** Where the service writes what it does; pass your own to route lines into another logger. */
export interface Logger {
  /** False when lines of this level are dropped, so callers can skip building them. */
  isEnabled?(level: LogLevel): boolean
  debug(msg: string, fields?: LogFields): void
  info(msg: string, fields?: LogFields): void
  warn(msg: string, fields?: LogFields): void
  error(msg: string, fields?: LogFields): void
  /** The per-request line at level info; without it, callers use `info('request', entry)`. */
  request?(entry: RequestLogEntry): void
  /** Lines dropped because the reader could not keep up (for /metrics), when the logger counts them. */
  readonly dropped?: number
}

/** The JSON logger: it never blocks and never throws; what it cannot hold it drops and counts. */
export interface JsonLogger extends Logger {
  isEnabled(level: LogLevel): boolean
  request(entry: RequestLogEntry): void
  /** An info line whatever the level (the `listening` line); dropped only when the sink refuses. */
  always(msg: string, fields?: LogFields): void
  /** Lines dropped so far: the buffer was full, the stream broken, or `write` threw. */
  readonly dropped: number
  /**
   * For shutdown: resolves once every line logged so far has been written by the stream, or at
   * once when the stream is broken. A stream that never calls back never resolves it: bound it.
   */
  flush(): Promise<void>
}

export interface JsonLoggerOptions extends LineSinkOptions {
  level?: LogLevel
  now?: () => Date
}

/** A logger that writes one JSON object per line (stdout by default). */
export function createJsonLogger(options: JsonLoggerOptions = {}): JsonLogger {
  const threshold = LOG_LEVELS.indexOf(options.level ?? 'info')
  if (threshold < 0) throw new Error(`createJsonLogger: unknown level "${String(options.level)}"`)
  const sink = createSink(options)
  const time = createIsoClock(options.now)
  const isEnabled = (level: LogLevel): boolean => LOG_LEVELS.indexOf(level) >= threshold
  const infoEnabled = isEnabled('info')
  const emit = (level: LogLevel, msg: string, fields: LogFields | undefined): void => {
    if (isEnabled(level)) sink.add(formatLine(time(), level, msg, fields))
  }
  return {
    isEnabled,
    debug: (msg, fields) => {
      emit('debug', msg, fields)
    },
    info: (msg, fields) => {
      emit('info', msg, fields)
    },
    warn: (msg, fields) => {
      emit('warn', msg, fields)
    },
    error: (msg, fields) => {
      emit('error', msg, fields)
    },
    request: (entry) => {
      if (infoEnabled) sink.add(formatRequestLine(time(), entry))
    },
    always: (msg, fields) => {
      sink.add(formatLine(time(), 'info', msg, fields))
    },
    get dropped() {
      return sink.dropped
    },
    flush: () => sink.flush(),
  }
}

/**
 * Hands the logger's queued lines to its stream when the process exits without a later turn of
 * the event loop: process.exit(), an uncaught exception. Writes to a pipe or a file that has room
 * go out at once, so a crash keeps the lines that led to it (SIGKILL still loses them). Returns
 * the function that removes the hook.
 */
export function flushOnExit(logger: JsonLogger): () => void {
  const onExit = (): void => {
    void logger.flush()
  }
  process.on('exit', onExit)
  return () => {
    process.off('exit', onExit)
  }
}

/** A logger that drops everything (the default when embedding). */
export const silentLogger: Logger = Object.freeze({
  isEnabled: () => false,
  debug() {},
  info() {},
  warn() {},
  error() {},
})

/** The parts of an error worth a log line: never sent to clients. */
export function describeError(error: unknown): Record<string, unknown> {
  if (error instanceof Error) return { error: error.message, stack: error.stack }
  return { error: String(error) }
}
