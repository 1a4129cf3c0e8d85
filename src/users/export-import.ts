import type { IncomingMessage, ServerResponse } from 'node:http'

import { HttpError, type FieldError } from '../errors.js'
import { ClientClosedError } from '../http/body.js'
import { lingerAfterResponse } from '../http/lingering-close.js'
import type { Store } from '../store/store.js'
import { isUserStatus, toRecord, type User } from './user.js'
import { isCanonicalUuid, type IdGenerator } from './uuid7.js'
import { validateCreate, validateReplace } from './validate-user.js'

/** The routes that read or write their bodies as streams (§12) instead of one JSON reply. */
export const BULK_OPERATIONS = ['exportUsers', 'importUsers'] as const
export type BulkOperationId = (typeof BULK_OPERATIONS)[number]

export function isBulkOperation(operationId: string): operationId is BulkOperationId {
  return (BULK_OPERATIONS as readonly string[]).includes(operationId)
}

/** What a streaming handler gets: the exchange itself, and the headers every answer carries. */
export interface StreamContext {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  /** x-request-id, cache-control and CORS headers as a flat name/value list. */
  readonly headers: readonly string[]
  readonly sub: string | undefined
  readonly requestId: string
}

export type StreamHandler = (context: StreamContext) => Promise<void>

export interface BulkOptions {
  store: Store
  now: () => number
  newId: IdGenerator
  /** Throws to refuse a write (maintenance), as for every other write. */
  writeGate: () => void
  /** The largest import body (IMPORT_MAX_BYTES, default 256 MiB). */
  importMaxBytes?: number | undefined
  /** Users per store page while exporting (default 500). */
  exportPageSize?: number | undefined
  /** Creates of one import in flight at once (default 64): one group commit can take them all. */
  importConcurrency?: number | undefined
  /**
   * Bytes of lines read ahead of the creates (default 16 MiB): the body is read while the creates
   * go on, so that an import of this size is wholly received, out of REQUEST_TIMEOUT_MS's reach,
   * however slowly the store takes it; past it, the body is read as fast as users are stored.
   */
  importReadAheadBytes?: number | undefined
  /** How long an export waits for a client that stopped reading before it gives up (default 120 s). */
  stallTimeoutMs?: number | undefined
}

export const DEFAULT_IMPORT_MAX_BYTES = 256 * 1024 * 1024
/** An import line longer than this gets a 413 result of its own; its bytes are never kept. */
export const MAX_LINE_BYTES = 64 * 1024
const NDJSON = 'application/x-ndjson'
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** One result line of an import. */
interface LineResult {
  readonly line: number
  readonly status: number
  readonly id?: string
  readonly code?: string
  readonly detail?: string
  readonly errors?: readonly FieldError[]
}

/** A line taken from the body, in input order, and its result once known. */
interface Pending {
  result: LineResult | undefined
}

/** A line read ahead, waiting for a free slot among the creates in flight. */
interface Waiting {
  readonly bytes: number
  readonly start: () => void
}

export function createBulkHandlers(options: BulkOptions): Record<BulkOperationId, StreamHandler> {
  const { store, now, newId, writeGate } = options
  const maxBytes = options.importMaxBytes ?? DEFAULT_IMPORT_MAX_BYTES
  const pageSize = options.exportPageSize ?? 500
  const concurrency = options.importConcurrency ?? 64
  const readAhead = options.importReadAheadBytes ?? 16 * 1024 * 1024
  const stallMs = options.stallTimeoutMs ?? 120_000
  let importing = false

  /** Creates one user of an import line, or says why not; never throws. */
  const importLine = async (line: number, text: string, actor: string | undefined, requestId: string): Promise<LineResult> => {
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      return { line, status: 400, code: 'bad_request', detail: 'The line is not valid JSON.' }
    }
    let user: User
    try {
      user = isObject(value) && Object.hasOwn(value, 'id') ? toExportedUser(value) : toNewUser(value, newId, now)
    } catch (error) {
      return failure(line, error)
    }
    const context = { actor, requestId }
    try {
      if (Object.hasOwn(value as object, 'id')) {
        const settled = await settledResult(line, user)
        if (settled !== undefined) return settled
      }
      await store.create(user, writeGate, context)
      return { line, status: 201, id: user.id }
    } catch (error) {
      // The same id written meanwhile (twice in one import): judge it against what is stored now.
      if (!(error instanceof HttpError)) {
        const settled = await settledResult(line, user).catch(() => undefined)
        if (settled !== undefined) return settled
      }
      return failure(line, error)
    }
  }

  /** 200 when the id already holds exactly this user, 409 when it holds (or held) another. */
  const settledResult = async (line: number, user: User): Promise<LineResult | undefined> => {
    const current = await store.get(user.id)
    if (current !== undefined) {
      if (current.json === toRecord(user).json) return { line, status: 200, id: user.id }
      return { line, status: 409, id: user.id, code: 'duplicate_id', detail: 'Another user with this id is stored.' }
    }
    if (await store.isDeleted(user.id)) {
      return { line, status: 409, id: user.id, code: 'duplicate_id', detail: 'A user with this id was deleted; ids are never reused.' }
    }
    return undefined
  }

  return {
    async exportUsers({ req, res, headers }) {
      res.writeHead(200, [...headers, 'content-type', NDJSON])
      if (req.method === 'HEAD') {
        res.end()
        return
      }
      // Keyset pages: every user that exists throughout is in exactly one page, whatever changes.
      let after: string | undefined
      for (;;) {
        const page = await store.list({ filter: {}, order: 'asc', limit: pageSize, ...(after === undefined ? {} : { after }) })
        let chunk = ''
        for (const record of page.items) chunk += `${record.json}\n`
        // One page at a time in memory: the next is only read once the socket took this one.
        if (chunk !== '' && !res.write(chunk) && !(await drained(res, stallMs))) return
        if (res.destroyed) return
        after = page.resumeAfter ?? page.items.at(-1)?.user.id
        if (!page.hasMore || after === undefined) break
      }
      res.end()
    },

    async importUsers({ req, res, headers, sub, requestId }) {
      if (Number(req.headers['content-length'] ?? 0) > maxBytes) {
        throw new HttpError('payload_too_large', `The import body is larger than ${maxBytes} bytes (IMPORT_MAX_BYTES).`)
      }
      if (importing) throw new HttpError('import_in_progress', 'Another import is running; try again when it has ended.')
      importing = true
      const pending: Pending[] = []
      let stalled = false
      const send = async (result: LineResult): Promise<void> => {
        if (!res.write(`${JSON.stringify(result)}\n`) && !(await drained(res, stallMs))) stalled = true
      }
      /** Sends every result at the head that is done, in input order. */
      const flushNow = async (): Promise<void> => {
        for (let head = pending[0]; head?.result !== undefined; head = pending[0]) {
          pending.shift()
          await send(head.result)
        }
      }
      // One flush at a time, each after the last: results go out as soon as they and those before are done.
      let flushing = Promise.resolve()
      const flush = (): Promise<void> => {
        flushing = flushing.then(flushNow)
        return flushing
      }
      const waiting: Waiting[] = []
      let waitingBytes = 0
      const running = new Set<Promise<void>>()
      let room: (() => void) | undefined
      /** Starts waiting lines while fewer than `concurrency` creates run; wakes the reader when there is room. */
      const pump = (): void => {
        for (let next = waiting[0]; next !== undefined && running.size < concurrency; next = waiting[0]) {
          waiting.shift()
          waitingBytes -= next.bytes
          next.start()
        }
        if (waitingBytes <= readAhead) room?.()
      }
      try {
        res.writeHead(200, [...headers, 'content-type', NDJSON])
        let lineNumber = 0
        const take = async (line: SplitLine): Promise<void> => {
          lineNumber += 1
          // White-space lines (a trailing blank line) carry no user and get no result.
          if (typeof line === 'string' && line.trim() === '') return
          const number = lineNumber
          const entry: Pending = { result: undefined }
          pending.push(entry)
          const bytes = typeof line === 'string' ? line.length : 0
          waiting.push({
            bytes,
            start: () => {
              const result = typeof line === 'string' ? importLine(number, line, sub, requestId) : Promise.resolve(refusedLine(number, line))
              const task = result.then((done) => {
                entry.result = done
                running.delete(task)
                pump()
                void flush()
              })
              running.add(task)
            },
          })
          waitingBytes += bytes
          pump()
          // A bounded read-ahead: past it, the body is not read further until creates make room.
          while (waitingBytes > readAhead) await new Promise<void>((resolve) => { room = resolve })
          room = undefined
        }
        const splitter = new LineSplitter(MAX_LINE_BYTES)
        let total = 0
        let tooLarge = false
        try {
          for await (const chunk of req as AsyncIterable<Buffer>) {
            total += chunk.length
            if (total > maxBytes) {
              tooLarge = true
              break
            }
            for (const line of splitter.push(chunk)) await take(line)
            if (stalled) break
          }
        } catch (error) {
          // The client went away mid-body: lines already taken still finish, nothing more is read.
          throw new ClientClosedError('the client closed the import before its body ended', { cause: error })
        }
        if (!tooLarge && !stalled) for (const line of splitter.end()) await take(line)
        while (running.size > 0 && !stalled) await Promise.all(running)
        await flush()
        if (tooLarge) {
          await send({ line: lineNumber + 1, status: 413, code: 'payload_too_large', detail: `The import body is larger than ${maxBytes} bytes (IMPORT_MAX_BYTES); the rest was not read.` })
          // The rest of the body is not read: close the connection once the answer is out.
          lingerAfterResponse(req.socket)
        }
        if (stalled) res.destroy()
        else res.end()
      } finally {
        // When the client went away or stopped reading, lines read ahead and not started are
        // dropped (their results would reach nobody); those started are written (or refused)
        // before another import may start.
        waiting.length = 0
        while (running.size > 0) await Promise.all(running)
        importing = false
      }
    },
  }
}

/** A user as exported: every field kept, the writable ones checked by the API's own rules. */
function toExportedUser(value: Record<string, unknown>): User {
  const { id, status, createdAt, updatedAt, version } = value
  const errors: FieldError[] = []
  const wrong = (pointer: string, message: string): void => { errors.push({ pointer, code: 'invalid_format', message }) }
  if (typeof id !== 'string' || !isCanonicalUuid(id)) wrong('/id', 'id must be a lower-case UUID.')
  if (!isUserStatus(status)) wrong('/status', 'status must be pending, active or suspended.')
  for (const [key, stamp] of [['createdAt', createdAt], ['updatedAt', updatedAt]] as const) {
    if (typeof stamp !== 'string' || !TIMESTAMP.test(stamp) || Number.isNaN(Date.parse(stamp))) {
      wrong(`/${key}`, `${key} must be a UTC time stamp like 2024-01-31T12:00:00.000Z.`)
    }
  }
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1) wrong('/version', 'version must be a whole number of at least 1.')
  if (errors.length > 0) throw new HttpError('validation_failed', 'The user is not valid.', { errors })
  const shape = { id, status, createdAt, updatedAt, version } as Pick<User, 'id' | 'status' | 'createdAt' | 'updatedAt' | 'version'>
  // The output-only fields may echo the values just checked; email, name and metadata follow the API's rules.
  const input = validateReplace(value, { ...shape, email: '', name: '', metadata: {} })
  return { ...shape, ...input }
}

/** A new user (email, name and metadata only): a fresh id, pending, as POST /users makes it. */
function toNewUser(value: unknown, newId: IdGenerator, now: () => number): User {
  const input = validateCreate(value)
  const { id, ms } = newId(now())
  const at = new Date(ms).toISOString()
  return { id, ...input, status: 'pending', createdAt: at, updatedAt: at, version: 1 }
}

function refusedLine(line: number, why: typeof TOO_LONG | typeof NOT_UTF8): LineResult {
  return why === TOO_LONG
    ? { line, status: 413, code: 'payload_too_large', detail: `The line is longer than ${MAX_LINE_BYTES} bytes.` }
    : { line, status: 400, code: 'bad_request', detail: 'The line is not valid UTF-8.' }
}

function failure(line: number, error: unknown): LineResult {
  if (!(error instanceof HttpError)) return { line, status: 500, code: 'internal', detail: 'The user could not be imported.' }
  return {
    line, status: error.status, code: error.code, detail: error.detail,
    ...(error.errors === undefined ? {} : { errors: error.errors }),
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** True once the socket takes more; false when it closed or stayed full for `stallMs`. */
function drained(res: ServerResponse, stallMs: number): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false)
  return new Promise((resolve) => {
    const done = (ok: boolean) => (): void => {
      clearTimeout(timer)
      res.off('drain', onDrain)
      res.off('close', onClose)
      if (!ok) res.destroy()
      resolve(ok)
    }
    const onDrain = done(true)
    const onClose = done(false)
    const timer = setTimeout(done(false), stallMs)
    res.on('drain', onDrain)
    res.on('close', onClose)
  })
}

/** A line's text, or why it has none. */
export type SplitLine = string | typeof TOO_LONG | typeof NOT_UTF8
export const TOO_LONG = Symbol('line too long')
export const NOT_UTF8 = Symbol('line not UTF-8')

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * Cuts a byte stream into lines. A line keeps at most `max` bytes: a longer one is dropped as it
 * arrives and comes out as TOO_LONG, so one huge line never sits in memory.
 */
export class LineSplitter {
  readonly #max: number
  #parts: Buffer[] = []
  #size = 0
  #oversize = false

  constructor(max: number) {
    this.#max = max
  }

  push(chunk: Buffer): SplitLine[] {
    const lines: SplitLine[] = []
    let start = 0
    for (let newline = chunk.indexOf(10, start); newline !== -1; newline = chunk.indexOf(10, start)) {
      this.#add(chunk.subarray(start, newline))
      lines.push(this.#take())
      start = newline + 1
    }
    if (start < chunk.length) this.#add(chunk.subarray(start))
    return lines
  }

  /** The last line, when the body did not end with a newline. */
  end(): SplitLine[] {
    return this.#size === 0 && !this.#oversize ? [] : [this.#take()]
  }

  #add(bytes: Buffer): void {
    if (this.#oversize) return
    this.#size += bytes.length
    if (this.#size > this.#max) {
      this.#oversize = true
      this.#parts = []
      return
    }
    if (bytes.length > 0) this.#parts.push(bytes)
  }

  #take(): SplitLine {
    const oversize = this.#oversize
    const parts = this.#parts
    const size = this.#size
    this.#parts = []
    this.#size = 0
    this.#oversize = false
    if (oversize) return TOO_LONG
    try {
      return utf8.decode(Buffer.concat(parts, size))
    } catch {
      return NOT_UTF8
    }
  }
}
