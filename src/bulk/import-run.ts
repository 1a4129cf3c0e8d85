import type { IncomingMessage, ServerResponse } from 'node:http'

import { LineReader, type SplitLine } from '../users/import-lines.js'
import { type LineResult, MAX_LINE_BYTES, toFailureResult } from './import-line.js'

export interface ImportRunOptions {
  readonly req: IncomingMessage
  /** Its head already written: the run writes result lines and ends it. */
  readonly res: ServerResponse
  /** Stores one line's user; never throws. */
  readonly importLine: (line: number, text: SplitLine) => Promise<LineResult>
  /** The largest body (IMPORT_MAX_BYTES): past it, a last 413 line and the rest is not read. */
  readonly maxBytes: number
  /** Body bytes read ahead of the creates, waiting as they came. */
  readonly readAheadBytes: number
  /** Lines whose creates run at once. */
  readonly concurrency: number
  /** Result bytes held for a client that reads slowly; past them, no new line is started. */
  readonly outputBytes: number
  /** How long a client may read nothing while results wait before it is dropped. */
  readonly stallMs: number
  /** Lines started between two turns of the event loop given to other requests. */
  readonly batch: number
  /** Runs once every line has ended, before the answer ends (the import's slot given back). */
  readonly beforeEnd?: (() => Promise<void>) | undefined
}

/** A line started, in input order, and its result line once it is known. */
interface Slot {
  text: string | undefined
}

/**
 * Runs one import over a request and its response, holding little whatever the client does: at
 * most `readAheadBytes` of body, `concurrency` creates, and about `outputBytes` of results. A
 * client that does not read its results pauses the run (no line starts, then the body is no
 * longer read), and is dropped after `stallMs`; one that leaves stops it at once: nothing more is
 * read or started, and the run resolves once the creates already started have ended (their users
 * are stored; their results reach nobody). The run yields to the event loop every `batch` lines,
 * so that a body of lines refused at once, or of blank lines, never keeps other requests
 * waiting.
 */
export class ImportRun {
  readonly #options: ImportRunOptions
  readonly #reader = new LineReader(MAX_LINE_BYTES)
  #received = 0
  #inputEnded = false
  #tooLarge = false
  /** The client left, or was dropped for not reading: nothing more is read, started or sent. */
  #left = false
  #lineNumber = 0
  readonly #slots: Slot[] = []
  #running = 0
  /** Bytes of results known and not yet handed to the response. */
  #unsentBytes = 0
  #flushScheduled = false
  #stallTimer: NodeJS.Timeout | undefined
  #waiter: (() => void) | undefined

  constructor(options: ImportRunOptions) {
    this.#options = options
  }

  async run(): Promise<void> {
    const { req, res } = this.#options
    const onData = (chunk: Buffer): void => {
      this.#take(chunk)
    }
    const onEnd = (): void => {
      if (this.#inputEnded) return
      this.#inputEnded = true
      this.#reader.end()
      this.#wake()
    }
    const onLeave = (): void => {
      this.#leave()
    }
    const onClose = (): void => {
      if (!res.writableFinished) this.#leave()
    }
    const onDrain = (): void => {
      this.#clearStall()
      this.#wake()
    }
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onLeave)
    res.on('close', onClose)
    res.on('drain', onDrain)
    // Run after a wait (the import's slot, asked of the cluster's primary): a client that left
    // meanwhile closed the answer already, and it will not say so again.
    if (res.destroyed) this.#leave()
    try {
      await this.#startLines()
      while (this.#running > 0) await this.#wait()
      if (this.#left) return
      this.#flush()
      if (this.#tooLarge) {
        const { maxBytes } = this.#options
        const detail = `The import body is larger than ${maxBytes} bytes (IMPORT_MAX_BYTES); the rest was not read.`
        res.write(
          `${JSON.stringify({ line: this.#lineNumber + 1, status: 413, code: 'payload_too_large', detail })}\n`,
        )
        // The body stays paused until the answer is out. Then the connection closes in stages
        // (the answer says Connection: close) and the rest is read and dropped within the
        // lingering bounds: never parsed into a user, nor answered as a next request.
        res.once('finish', () => {
          req.resume()
        })
      }
      await this.#options.beforeEnd?.()
      res.end()
    } finally {
      this.#clearStall()
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onLeave)
      res.off('close', onClose)
      res.off('drain', onDrain)
    }
  }

  /** Starts each line as room allows, until the body is used up or the client is gone. */
  async #startLines(): Promise<void> {
    const { concurrency, batch } = this.#options
    while (!this.#left) {
      if (this.#outputFull()) {
        this.#armStall()
        await this.#wait()
        continue
      }
      if (this.#running >= concurrency) {
        await this.#wait()
        continue
      }
      const text = this.#reader.next()
      this.#readOnIfRoom()
      if (text === undefined) {
        if (this.#inputEnded) return
        await this.#wait()
        continue
      }
      this.#lineNumber += 1
      // White-space lines (a trailing blank line) carry no user and get no result.
      if (typeof text !== 'string' || text.trim() !== '') this.#start(this.#lineNumber, text)
      // Blank lines count too: 16 MiB of them read ahead would hold the loop for seconds.
      if (this.#lineNumber % batch === 0) await yieldToLoop()
    }
  }

  #start(line: number, text: SplitLine): void {
    const slot: Slot = { text: undefined }
    this.#slots.push(slot)
    this.#running += 1
    void this.#options
      .importLine(line, text)
      .catch((error: unknown) => toFailureResult(line, error))
      .then((result) => {
        slot.text = `${JSON.stringify(result)}\n`
        this.#unsentBytes += slot.text.length
        this.#running -= 1
        this.#flushSoon()
        this.#wake()
      })
  }

  #take(chunk: Buffer): void {
    if (this.#inputEnded || this.#left) return
    const { req, maxBytes, readAheadBytes } = this.#options
    const before = this.#received
    this.#received += chunk.length
    if (this.#received > maxBytes) {
      // The lines that end within the limit are imported, however the body was cut in chunks;
      // the line the limit cuts stays unfinished in the reader and is dropped with the rest.
      if (before < maxBytes) this.#reader.push(chunk.subarray(0, maxBytes - before))
      this.#tooLarge = true
      this.#inputEnded = true
      req.pause()
    } else {
      this.#reader.push(chunk)
      if (this.#reader.held > readAheadBytes) req.pause()
    }
    this.#wake()
  }

  /** Reads the body on once the lines read ahead have shrunk below the bound. */
  #readOnIfRoom(): void {
    const { req, readAheadBytes } = this.#options
    if (req.isPaused() && !this.#inputEnded && !this.#left && this.#reader.held <= readAheadBytes)
      req.resume()
  }

  #outputFull(): boolean {
    return this.#options.res.writableLength + this.#unsentBytes >= this.#options.outputBytes
  }

  /** Results go out once per turn of the event loop: one write for all the lines known by then. */
  #flushSoon(): void {
    if (this.#flushScheduled) return
    this.#flushScheduled = true
    setImmediate(() => {
      this.#flushScheduled = false
      this.#flush()
      this.#wake()
    })
  }

  /** Writes every result at the head that is known, in input order. */
  #flush(): void {
    if (this.#left) return
    let text = ''
    for (let head = this.#slots[0]; head?.text !== undefined; head = this.#slots[0]) {
      this.#slots.shift()
      text += head.text
    }
    if (text === '') return
    this.#unsentBytes -= text.length
    this.#options.res.write(text)
  }

  #armStall(): void {
    this.#stallTimer ??= setTimeout(() => {
      // A client that reads nothing for this long is not buffered for: it is dropped.
      this.#options.res.destroy()
      this.#leave()
    }, this.#options.stallMs)
  }

  #clearStall(): void {
    clearTimeout(this.#stallTimer)
    this.#stallTimer = undefined
  }

  #leave(): void {
    if (this.#left) return
    this.#left = true
    this.#options.req.pause()
    this.#clearStall()
    this.#wake()
  }

  #wait(): Promise<void> {
    return new Promise((resolve) => {
      this.#waiter = resolve
    })
  }

  #wake(): void {
    const waiter = this.#waiter
    this.#waiter = undefined
    waiter?.()
  }
}

function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => {
    setImmediate(resolve)
  })
}
