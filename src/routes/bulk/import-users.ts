import { ImportRun } from '../../bulk/import-run.js'
import { dropIfUnread, readyToStream, streamHeaders } from '../../bulk/slow-client.js'
import { checkUntagged } from '../../domain/preconditions.js'
import { sendContinue } from '../../http/http-server.js'
import { lingerAfterResponse } from '../../http/lingering-close.js'
import { HttpError } from '../../http/problem.js'
import { type Route, STREAMED } from '../route.js'
import { API_ROUTE, NDJSON, TEXT } from '../route-defaults.js'
import { refuseQueryParameters } from './no-query.js'

/** Output held for one response whose client reads slowly (about 1 MiB). */
export const OUTPUT_BYTES = 1024 * 1024
/** Import lines started between two turns of the event loop given to other requests. */
const IMPORT_BATCH = 256

/** Users from NDJSON, one result line per input line, streamed as each is durable (docs/bulk.md). */
export const importUsers: Route = {
  ...API_ROUTE,
  operationId: 'importUsers',
  method: 'POST',
  path: '/users:import',
  scope: 'users:admin',
  body: 'stream',
  mediaTypes: [NDJSON],
  summary: 'Import users from NDJSON; one result line per input line, streamed',
  request: {
    schema: TEXT,
    description:
      'NDJSON: one user per line, as exported (id, status, time stamps and version kept) or new (email, name and metadata only). At most IMPORT_MAX_BYTES, read as a stream; a line over 128 KiB gets a 413 result of its own (the largest user an export writes is about 100 KB).',
  },
  responses: {
    200: {
      description:
        'One result per non-blank input line, in input order, each sent once its user is durable: {"line":1,"status":201,"id":"…"}; 200 when that id already holds exactly that user; 400 a malformed line, 409 (code duplicate_email or duplicate_id), 413 a line over 128 KiB, 422 with errors, 503 storage_unavailable or maintenance. A chunked body that grows past IMPORT_MAX_BYTES gets a last 413 line (code payload_too_large) and the rest is not read. Every import answer says Connection: close: the connection closes once the answer is out, and a request sent behind the body on it is neither processed nor answered.',
      content: { [NDJSON]: TEXT },
    },
  },
  errors: [409],
  async handle(context) {
    const { req, res, requestId, faults } = context
    if (!(await readyToStream(req))) return STREAMED
    const bulk = context.services.bulk
    const maxBytes = bulk.importMaxBytes
    if (Number(req.headers['content-length'] ?? 0) > maxBytes) {
      throw new HttpError(
        'payload_too_large',
        `The import body is larger than ${maxBytes} bytes (IMPORT_MAX_BYTES).`,
      )
    }
    // After the 413 (a query's 400 comes after it) and before anything is read or stored: a
    // parameter this route does not know changes nothing.
    refuseQueryParameters(context.rawQuery, 'the import')
    checkUntagged(context.preconditions, false)
    const slot = await bulk.startImport()
    if (slot === undefined)
      throw new HttpError(
        'import_in_progress',
        'Another import is running; try again when it has ended.',
      )
    try {
      // The head goes out before the body is read, and a chunked body may pass the limit: the
      // answer cannot promise keep-alive, so every import closes its connection, in stages, once
      // its answer is out (and a request sent behind its body is not processed).
      lingerAfterResponse(req.socket)
      sendContinue(res)
      res.writeHead(200, [...streamHeaders(context), 'content-type', NDJSON, 'connection', 'close'])
      // Bulk: each new user's file is left to the store's next batch, its event durable first.
      const change = { actor: context.claims?.sub, requestId, bulk: true }
      const report = {
        fault: (error: HttpError, line: number) => {
          faults.fault(error, { requestId, operation: 'importUsers', line })
        },
        stored: () => {
          faults.wrote()
        },
      }
      const run = new ImportRun({
        req,
        res,
        maxBytes,
        readAheadBytes: bulk.importReadAheadBytes,
        concurrency: bulk.importConcurrency,
        stallMs: bulk.stallMs,
        outputBytes: OUTPUT_BYTES,
        batch: IMPORT_BATCH,
        importLine: (line, text) => bulk.importLine(line, text, change, report),
        // Free before the answer ends: a client may send its next import the moment it has it.
        beforeEnd: () => slot.release(),
      })
      await run.run()
      if (res.writableEnded) dropIfUnread(res, bulk.stallMs)
    } finally {
      // Every line started has ended by now (stored or refused): another import may start.
      await slot.release()
    }
    return STREAMED
  },
}
