import type { Writable } from 'node:stream'

const DEFAULT_MAX_BUFFER_BYTES = 1024 * 1024
/**
 * A busy server's lines go out at most once per this many ms: each write to a pipe costs a system
 * call and the stream's steps, about a microsecond a request when every turn of the event loop
 * made one. A line after a quiet spell still goes out in the next turn.
 */
const DEFAULT_MIN_WRITE_INTERVAL_MS = 5

/** Where a logger's finished lines go; it never throws and never blocks. */
export interface LineSink {
  /** Lines dropped so far: the buffer was full, the stream broken, or `write` threw. */
  readonly dropped: number
  add(line: string): void
  /** Resolves once every line added so far has been written, or at once when the stream is broken. */
  flush(): Promise<void>
}

export interface LineSinkOptions {
  /** Receives each line synchronously, instead of a stream. */
  write?: (line: string) => void
  /** Where lines go, in batches, when `write` is not given (default process.stdout). */
  stream?: Writable
  /** Bound on the bytes held, our queue plus the stream's own buffer (default 1 MiB). */
  maxBufferBytes?: number
  /** The shortest time between two writes to the stream, in ms (default 5; 0: every turn). */
  minWriteIntervalMs?: number
}

/** The sink a JSON logger writes to: `write` line by line, or else a stream in batches. */
export function createSink(options: LineSinkOptions): LineSink {
  const {
    write,
    stream,
    maxBufferBytes = DEFAULT_MAX_BUFFER_BYTES,
    minWriteIntervalMs = DEFAULT_MIN_WRITE_INTERVAL_MS,
  } = options
  if (!Number.isSafeInteger(maxBufferBytes) || maxBufferBytes < 1) {
    throw new Error(`createJsonLogger: maxBufferBytes is not a positive integer: ${maxBufferBytes}`)
  }
  if (!Number.isFinite(minWriteIntervalMs) || minWriteIntervalMs < 0) {
    throw new Error(
      `createJsonLogger: minWriteIntervalMs is not a number of ms: ${minWriteIntervalMs}`,
    )
  }
  if (write === undefined) {
    return new StreamSink(stream ?? process.stdout, maxBufferBytes, minWriteIntervalMs)
  }
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
 * Queues lines and hands them to the stream in batches: in the next turn of the event loop, or
 * once the interval since the last write has passed, and none while the stream asks us to wait
 * for 'drain'. What would push the bytes held past the bound is dropped; after an error or a
 * close, everything is.
 */
class StreamSink implements LineSink {
  readonly #stream: Writable
  readonly #maxBytes: number
  readonly #intervalMs: number
  #queue: string[] = []
  #queuedBytes = 0
  #dropped = 0
  #broken = false
  #awaitingDrain = false
  #immediate: NodeJS.Immediate | undefined
  #timer: NodeJS.Timeout | undefined
  #lastWriteAt = Number.NEGATIVE_INFINITY
  #batchesWritten = 0
  #batchesDone = 0
  #waiters: { batch: number; resolve: () => void }[] = []

  constructor(stream: Writable, maxBytes: number, intervalMs: number) {
    this.#stream = stream
    this.#maxBytes = maxBytes
    this.#intervalMs = intervalMs
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
    if (this.#immediate === undefined && this.#timer === undefined && !this.#awaitingDrain) {
      const wait = this.#lastWriteAt + this.#intervalMs - performance.now()
      if (wait > 0) this.#timer = setTimeout(this.#due, wait)
      else this.#immediate = setImmediate(this.#pump)
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
    this.#unschedule()
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
    this.#lastWriteAt = performance.now()
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

  /**
   * Node counts a timer in whole ms of a clock it truncates: one set for the fractional rest of an
   * interval fires up to 1.5 ms early, nearly every time. The rest is waited for again, so that the
   * interval holds by the clock the last write was timed with.
   */
  #due = (): void => {
    this.#timer = undefined
    const wait = this.#lastWriteAt + this.#intervalMs - performance.now()
    if (wait > 0) this.#timer = setTimeout(this.#due, wait)
    else this.#pump()
  }

  #unschedule(): void {
    if (this.#immediate !== undefined) clearImmediate(this.#immediate)
    if (this.#timer !== undefined) clearTimeout(this.#timer)
    this.#immediate = undefined
    this.#timer = undefined
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
    this.#unschedule()
    this.#stream.off('drain', this.#drained)
    for (const waiter of this.#waiters) waiter.resolve()
    this.#waiters = []
  }
}
