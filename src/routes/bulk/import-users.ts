import { HttpError } from '../../http/problem.js'
import { type Route, STREAMED } from '../route.js'
import { API_ROUTE, NDJSON, TEXT } from '../route-defaults.js'
import { ImportRun } from './import-run.js'
import { dropIfUnread, readyToStream, streamHeaders } from './slow-client.js'

/** Output held for one response whose client reads slowly (§9: about 1 MiB). */
export const OUTPUT_BYTES = 1024 * 1024
/** Import lines started between two turns of the event loop given to other requests. */
const IMPORT_BATCH = 256

/** Users from NDJSON, one result line per input line, streamed as each is durable (§12). */
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
      'NDJSON: one user per line, as exported (id, status, time stamps and version kept) or new (email, name and metadata only). At most IMPORT_MAX_BYTES, read as a stream; a line over 64 KiB gets a 413 result of its own.',
  },
  responses: {
    200: {
      description:
        'One result per non-blank input line, in input order, each sent once its user is durable: {"line":1,"status":201,"id":"…"}; 200 when that id already holds exactly that user; 400 a malformed line, 409 (code duplicate_email or duplicate_id), 413 a line over 64 KiB, 422 with errors, 503 storage_unavailable or maintenance.',
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
    if (bulk.importing)
      throw new HttpError(
        'import_in_progress',
        'Another import is running; try again when it has ended.',
      )
    bulk.importing = true
    try {
      res.writeHead(200, [...streamHeaders(context), 'content-type', NDJSON])
      const change = { actor: context.claims?.sub, requestId }
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
      })
      await run.run()
      if (res.writableEnded) dropIfUnread(res, bulk.stallMs)
    } finally {
      // Every line started has ended by now (stored or refused): another import may start.
      bulk.importing = false
    }
    return STREAMED
  },
}
