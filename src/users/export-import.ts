import type { IncomingMessage, ServerResponse } from 'node:http'

import { HttpError } from '../errors.js'
import type { Store } from '../store/store.js'
import { ImportRun } from './import-run.js'
import { createLineImporter, type LineReport } from './import-user.js'
import type { IdGenerator } from '../domain/uuid7.js'

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
  /** Told of each import line's storage fault and of each user stored (the storage fault log). */
  readonly report?: LineReport | undefined
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
   * Body bytes read ahead of the creates (default 16 MiB): the body is read while the creates go
   * on, so that an import of this size is wholly received, out of REQUEST_TIMEOUT_MS's reach,
   * however slowly the store takes it; past it, the body is read as fast as users are stored.
   */
  importReadAheadBytes?: number | undefined
  /** How long an export or an import waits for a client that stopped reading before it drops it (default 120 s). */
  stallTimeoutMs?: number | undefined
}

export const DEFAULT_IMPORT_MAX_BYTES = 256 * 1024 * 1024
/** Output held for one response whose client reads slowly (§9: about 1 MiB). */
export const OUTPUT_BYTES = 1024 * 1024
/** The export's writes: large enough to cost few system calls, small beside OUTPUT_BYTES. */
const WRITE_BYTES = 64 * 1024
/** Import lines started between two turns of the event loop given to other requests. */
const IMPORT_BATCH = 256
const NDJSON = 'application/x-ndjson'

export function createBulkHandlers(options: BulkOptions): Record<BulkOperationId, StreamHandler> {
  const { store } = options
  const maxBytes = options.importMaxBytes ?? DEFAULT_IMPORT_MAX_BYTES
  const pageSize = options.exportPageSize ?? 500
  const concurrency = options.importConcurrency ?? 64
  const readAheadBytes = options.importReadAheadBytes ?? 16 * 1024 * 1024
  const stallMs = options.stallTimeoutMs ?? 120_000
  const importLine = createLineImporter(options)
  let importing = false

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
        // One page at a time in memory, written in pieces of about WRITE_BYTES, each once the
        // socket took the last: the next page is only read once the socket took this one.
        let piece = ''
        for (const [i, record] of page.items.entries()) {
          piece += `${record.json}\n`
          if (piece.length < WRITE_BYTES && i < page.items.length - 1) continue
          const taken = res.write(piece)
          piece = ''
          if (!taken && !(await drained(res, stallMs))) return
        }
        if (res.destroyed) return
        after = page.resumeAfter ?? page.items.at(-1)?.user.id
        if (!page.hasMore || after === undefined) break
      }
      endOrDrop(res, stallMs)
    },

    async importUsers({ req, res, headers, sub, requestId, report }) {
      if (Number(req.headers['content-length'] ?? 0) > maxBytes) {
        throw new HttpError('payload_too_large', `The import body is larger than ${maxBytes} bytes (IMPORT_MAX_BYTES).`)
      }
      if (importing) throw new HttpError('import_in_progress', 'Another import is running; try again when it has ended.')
      importing = true
      try {
        res.writeHead(200, [...headers, 'content-type', NDJSON])
        const context = { actor: sub, requestId }
        const run = new ImportRun({
          req, res, maxBytes, readAheadBytes, concurrency, stallMs,
          outputBytes: OUTPUT_BYTES, batch: IMPORT_BATCH,
          importLine: (line, text) => importLine(line, text, context, report),
        })
        await run.run()
        if (res.writableEnded) dropIfUnread(res, stallMs)
      } finally {
        // Every line started has ended by now (stored or refused): another import may start.
        importing = false
      }
    },
  }
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

function endOrDrop(res: ServerResponse, stallMs: number): void {
  res.end()
  dropIfUnread(res, stallMs)
}

/**
 * An answer ended but not yet taken by its client: dropped when the client reads none of it for
 * `stallMs`, so that no connection holds its last megabyte forever.
 */
function dropIfUnread(res: ServerResponse, stallMs: number): void {
  let waiting = res.writableLength
  const check = (): void => {
    if (res.writableFinished || res.destroyed) return
    if (res.writableLength >= waiting) {
      res.destroy()
      return
    }
    waiting = res.writableLength
    timer = setTimeout(check, stallMs)
  }
  let timer = setTimeout(check, stallMs)
  res.once('close', () => { clearTimeout(timer) })
}
