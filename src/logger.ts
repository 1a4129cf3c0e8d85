export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

type Fields = Readonly<Record<string, unknown>>

/** Where the service writes what it does; pass your own to route lines into another logger. */
export interface Logger {
  /** False when lines of this level are dropped, so callers can skip building them. */
  isEnabled?(level: LogLevel): boolean
  debug(msg: string, fields?: Fields): void
  info(msg: string, fields?: Fields): void
  warn(msg: string, fields?: Fields): void
  error(msg: string, fields?: Fields): void
}

export interface JsonLoggerOptions {
  level?: LogLevel
  write?: (line: string) => void
  now?: () => Date
}

/** A logger that writes one JSON object per line (stdout by default). */
export function createJsonLogger(options: JsonLoggerOptions = {}): Logger {
  const threshold = LOG_LEVELS.indexOf(options.level ?? 'info')
  const write = options.write ?? ((line: string) => { process.stdout.write(line) })
  const now = options.now ?? (() => new Date())
  const emit = (level: LogLevel, msg: string, fields: Fields | undefined): void => {
    if (LOG_LEVELS.indexOf(level) < threshold) return
    write(`${JSON.stringify({ time: now().toISOString(), level, msg, ...fields })}\n`)
  }
  return {
    isEnabled: (level) => LOG_LEVELS.indexOf(level) >= threshold,
    debug: (msg, fields) => { emit('debug', msg, fields) },
    info: (msg, fields) => { emit('info', msg, fields) },
    warn: (msg, fields) => { emit('warn', msg, fields) },
    error: (msg, fields) => { emit('error', msg, fields) },
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
