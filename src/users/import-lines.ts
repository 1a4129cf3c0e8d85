/** A line's text, or why it has none. */
export type SplitLine = string | typeof TOO_LONG | typeof NOT_UTF8
export const TOO_LONG = Symbol('line too long')
export const NOT_UTF8 = Symbol('line not UTF-8')

const NEWLINE = 10
const CR = 13
/** What a waiting chunk costs beyond its bytes, counted generously (its Buffer is ~100 bytes). */
const CHUNK_COST = 1024
/** Past this many pieces, a line's bytes are gathered into one buffer. */
const MANY_PARTS = 64
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * Cuts a byte stream into lines, one line at a time on demand: the bytes pushed wait as they came
 * (`buffered` counts them), and only the line asked for is decoded. A line keeps at most `max`
 * bytes: a longer one is dropped as it is scanned and comes out as TOO_LONG, so one huge line
 * never sits in memory. The CR of a CRLF ends the line rather than filling it: it counts toward
 * no limit, so a file with CRLF line ends takes the lines its LF twin takes.
 */
export class LineReader {
  readonly #max: number
  readonly #chunks: Buffer[] = []
  /** Where the first chunk's unread bytes begin. */
  #offset = 0
  #buffered = 0
  #ended = false
  /** The line being gathered: its pieces, its size, and whether it already passed `max`. */
  #parts: Buffer[] = []
  /**
   * A line of many small pieces, copied into one buffer instead: a line sent a byte at a time
   * would otherwise be held as one Buffer per byte (12 to 16 MB more memory for 120 KiB).
   */
  #gathered: Buffer | undefined
  #size = 0
  #oversize = false
  #started = false

  constructor(max: number) {
    this.#max = max
  }

  /** Bytes pushed and not yet taken by next(). */
  get buffered(): number {
    return this.#buffered
  }

  /**
   * What the bytes waiting hold, about: each chunk counts CHUNK_COST more than its bytes, as its
   * Buffer object does. A body sent a byte at a time arrives as one chunk per byte, and holding
   * 16 MiB of those took some 450 MB where 16 MiB of large chunks take 16.
   */
  get held(): number {
    return this.#buffered + this.#chunks.length * CHUNK_COST
  }

  /** True once end() was called and every line has been taken. */
  get done(): boolean {
    return this.#ended && this.#buffered === 0 && !this.#started
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return
    this.#chunks.push(chunk)
    this.#buffered += chunk.length
  }

  /** No more bytes will come: a last line without a newline is a line too. */
  end(): void {
    this.#ended = true
  }

  /** The next whole line, or undefined until more bytes are pushed (or after the last line). */
  next(): SplitLine | undefined {
    for (let chunk = this.#chunks[0]; chunk !== undefined; chunk = this.#chunks[0]) {
      const newline = chunk.indexOf(NEWLINE, this.#offset)
      const stop = newline === -1 ? chunk.length : newline
      this.#add(chunk.subarray(this.#offset, stop))
      const next = newline === -1 ? chunk.length : newline + 1
      this.#buffered -= next - this.#offset
      this.#offset = next
      if (this.#offset === chunk.length) {
        this.#chunks.shift()
        this.#offset = 0
      }
      if (newline !== -1) return this.#take()
    }
    return this.#ended && this.#started ? this.#take() : undefined
  }

  #add(bytes: Buffer): void {
    this.#started = true
    if (this.#oversize) return
    this.#size += bytes.length
    // One byte past `max` is kept until the line ends: it may be the CR of a CRLF.
    if (this.#size > this.#max + 1) {
      this.#oversize = true
      this.#parts = []
      this.#gathered = undefined
      return
    }
    if (bytes.length === 0) return
    if (this.#gathered !== undefined) {
      bytes.copy(this.#gathered, this.#size - bytes.length)
      return
    }
    this.#parts.push(bytes)
    if (this.#parts.length < MANY_PARTS) return
    // Room for the longest line kept, and the one byte past it (the CR of a CRLF).
    this.#gathered = Buffer.allocUnsafe(this.#max + 1)
    let at = 0
    for (const part of this.#parts) at += part.copy(this.#gathered, at)
    this.#parts = []
  }

  #take(): SplitLine {
    const oversize = this.#oversize
    const gathered = this.#gathered
    const parts = gathered === undefined ? this.#parts : [gathered.subarray(0, this.#size)]
    const size = this.#size
    this.#parts = []
    this.#gathered = undefined
    this.#size = 0
    this.#oversize = false
    this.#started = false
    if (oversize || (size > this.#max && parts.at(-1)?.at(-1) !== CR)) return TOO_LONG
    try {
      return utf8.decode(
        parts.length === 1 && parts[0] !== undefined ? parts[0] : Buffer.concat(parts, size),
      )
    } catch {
      return NOT_UTF8
    }
  }
}
