import type { Writable } from 'node:stream'

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

type Fields = Readonly<Record<string, unknown>>

/** The fields of the per-request line, in the order they are written. */
export interface RequestLogEntry {
  requestId: string
  method: string
  path: string
  status: number
  durationMs: number
  sub: string | undefined
  traceId?: string | undefined
}

/** Where the service writes what it does; pass your own to route lines into another logger. */
export interface Logger {
  /** False when lines of this level are dropped, so callers can skip building them. */
  isEnabled?(level: LogLevel): boolean
  debug(msg: string, fields?: Fields): void
  info(msg: string, fields?: Fields): void
  warn(msg: string, fields?: Fields): void
  error(msg: string, fields?: Fields): void
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
  always(msg: string, fields?: Fields): void
  /** Lines dropped so far: the buffer was full, the stream broken, or `write` threw. */
  readonly dropped: number
  /**
   * For shutdown: resolves once every line logged so far has been written by the stream, or at
   * once when the stream is broken. A stream that never calls back never resolves it: bound it.
   */
  flush(): Promise<void>
}

export interface JsonLoggerOptions {
  level?: LogLevel
  /** Receives each line synchronously, instead of a stream. */
  write?: (line: string) => void
  /** Where lines go, in batches, when `write` is not given (default process.stdout). */
  stream?: Writable
  /** Bound on the bytes held, our queue plus the stream's own buffer (default 1 MiB). */
  maxBufferBytes?: number
  now?: () => Date
}

const DEFAULT_MAX_BUFFER_BYTES = 1024 * 1024

/** A logger that writes one JSON object per line (stdout by default). */
export function createJsonLogger(options: JsonLoggerOptions = {}): JsonLogger {
  const threshold = LOG_LEVELS.indexOf(options.level ?? 'info')
  if (threshold < 0) throw new Error(`createJsonLogger: unknown level "${String(options.level)}"`)
  const sink = createSink(options)
  const time = createIsoClock(options.now)
  const isEnabled = (level: LogLevel): boolean => LOG_LEVELS.indexOf(level) >= threshold
  const infoEnabled = isEnabled('info')
  const emit = (level: LogLevel, msg: string, fields: Fields | undefined): void => {
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

function formatLine(time: string, level: LogLevel, msg: string, fields?: Fields): string {
  try {
    return `${JSON.stringify({ time, level, msg, ...fields })}\n`
  } catch (error) {
    // A BigInt, a cycle or a throwing getter in the fields must not make logging throw.
    const reason = error instanceof Error ? error.message : 'unknown'
    const logError = `fields not serializable: ${reason}`
    return `${JSON.stringify({ time, level, msg, logError })}\n`
  }
}

/** Byte for byte what formatLine gives for `info('request', entry)`, without building an object. */
function formatRequestLine(time: string, entry: RequestLogEntry): string {
  // time comes from toISOString: ASCII that never needs escaping.
  let line = `{"time":"${time}","level":"info","msg":"request"`
  line += `,"requestId":${toJsonString(entry.requestId)}`
  line += `,"method":${toJsonString(entry.method)},"path":${toJsonString(entry.path)}`
  line += `,"status":${toJsonNumber(entry.status)},"durationMs":${toJsonNumber(entry.durationMs)}`
  if (entry.sub !== undefined) line += `,"sub":${toJsonString(entry.sub)}`
  if (entry.traceId !== undefined) line += `,"traceId":${toJsonString(entry.traceId)}`
  return `${line}}\n`
}

// Every surrogate takes the slow path, paired or not: rare in logged values, and always right.
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/

function toJsonString(value: string): string {
  return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`
}

function toJsonNumber(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null'
}

/** The ISO time of each line, formatted once per millisecond. */
function createIsoClock(now: (() => Date) | undefined): () => string {
  const read = now === undefined ? Date.now : () => now().getTime()
  let lastMs = Number.NaN
  let lastIso = ''
  return () => {
    const ms = read()
    if (ms !== lastMs) {
      lastMs = ms
      const date = new Date(ms)
      lastIso = Number.isNaN(date.getTime()) ? 'Invalid Date' : date.toISOString()
    }
    return lastIso
  }
}

interface LineSink {
  readonly dropped: number
  add(line: string): void
  flush(): Promise<void>
}

function createSink(options: JsonLoggerOptions): LineSink {
  const { write, stream, maxBufferBytes = DEFAULT_MAX_BUFFER_BYTES } = options
  if (!Number.isSafeInteger(maxBufferBytes) || maxBufferBytes < 1) {
    throw new Error(`createJsonLogger: maxBufferBytes is not a positive integer: ${maxBufferBytes}`)
  }
  if (write === undefined) return new StreamSink(stream ?? process.stdout, maxBufferBytes)
  if (stream !== undefined) throw new Error('createJsonLogger: give write or stream, not both')
  return new FunctionSink(write)
}

class FunctionSink implements LineSink {
  readonly #write: (line: string) => void
  #dropped = 0

  constructor(write: (line: string) => void) {
    this.#write = write
  }

  get dropped(): number {
    return this.#dropped
  }

  add(line: string): void {
    try {
      this.#write(line)
    } catch {
      this.#dropped += 1
    }
  }

  flush(): Promise<void> {
    return Promise.resolve()
  }
}

/**
 * Queues lines and hands them to the stream in batches, one write per turn of the event loop, and
 * none while the stream asks us to wait for 'drain'. What would push the bytes held past the
 * bound is dropped; after an error or a close, everything is.
 */
class StreamSink implements LineSink {
  readonly #stream: Writable
  readonly #maxBytes: number
  #queue: string[] = []
  #queuedBytes = 0
  #dropped = 0
  #broken = false
  #awaitingDrain = false
  #scheduled: NodeJS.Immediate | undefined
  #batchesWritten = 0
  #batchesDone = 0
  #waiters: { batch: number; resolve: () => void }[] = []

  constructor(stream: Writable, maxBytes: number) {
    this.#stream = stream
    this.#maxBytes = maxBytes
    // Never removed: an 'error' without a listener would crash the process, even after we stop.
    stream.on('error', this.#break)
    stream.on('close', this.#break)
  }

  get dropped(): number {
    return this.#dropped
  }

  add(line: string): void {
    if (!this.#broken && !this.#stream.writable) this.#break()
    if (this.#broken) {
      this.#dropped += 1
      return
    }
    const bytes = Buffer.byteLength(line)
    if (this.#queuedBytes + this.#stream.writableLength + bytes > this.#maxBytes) {
      this.#dropped += 1
      return
    }
    this.#queue.push(line)
    this.#queuedBytes += bytes
    if (this.#scheduled === undefined && !this.#awaitingDrain) {
      this.#scheduled = setImmediate(this.#pump)
    }
  }

  flush(): Promise<void> {
    if (this.#queue.length > 0 && !this.#awaitingDrain) this.#pump()
    // Written at once by pump, or else the batch that the next 'drain' writes.
    const batch = this.#batchesWritten + (this.#queue.length > 0 ? 1 : 0)
    if (this.#broken || this.#batchesDone >= batch) return Promise.resolve()
    return new Promise((resolve) => {
      this.#waiters.push({ batch, resolve })
    })
  }

  #pump = (): void => {
    if (this.#scheduled !== undefined) clearImmediate(this.#scheduled)
    this.#scheduled = undefined
    if (this.#broken || this.#awaitingDrain || this.#queue.length === 0) return
    if (!this.#stream.writable) {
      this.#break()
      return
    }
    // A Buffer, so that writableLength counts bytes (a net.Socket counts a string's UTF-16 units).
    const batch = Buffer.from(this.#queue.join(''))
    this.#queue = []
    this.#queuedBytes = 0
    this.#batchesWritten += 1
    let ready: boolean
    try {
      ready = this.#stream.write(batch, this.#written)
    } catch {
      this.#break()
      return
    }
    if (!ready && !this.#broken) {
      this.#awaitingDrain = true
      this.#stream.once('drain', this.#drained)
    }
  }

  #drained = (): void => {
    this.#awaitingDrain = false
    this.#pump()
  }

  #written = (error?: Error | null): void => {
    this.#batchesDone += 1
    if (error !== undefined && error !== null) this.#break()
    this.#waiters = this.#waiters.filter((waiter) => {
      if (waiter.batch > this.#batchesDone) return true
      waiter.resolve()
      return false
    })
  }

  #break = (): void => {
    if (this.#broken) return
    this.#broken = true
    this.#dropped += this.#queue.length
    this.#queue = []
    this.#queuedBytes = 0
    if (this.#scheduled !== undefined) clearImmediate(this.#scheduled)
    this.#scheduled = undefined
    this.#stream.off('drain', this.#drained)
    for (const waiter of this.#waiters) waiter.resolve()
    this.#waiters = []
  }
}
