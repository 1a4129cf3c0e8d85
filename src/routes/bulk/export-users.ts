import { drained, dropIfUnread, readyToStream, streamHeaders } from '../../bulk/slow-client.js'
import { checkUntagged } from '../../domain/preconditions.js'
import { type Route, STREAMED } from '../route.js'
import { API_ROUTE, NDJSON, TEXT } from '../route-defaults.js'
import { refuseQueryParameters } from './no-query.js'

/** The export's writes: large enough to cost few system calls, small beside OUTPUT_BYTES. */
const WRITE_BYTES = 64 * 1024

/** Every user as NDJSON, streamed a store page at a time (docs/bulk.md). */
export const exportUsers: Route = {
  ...API_ROUTE,
  operationId: 'exportUsers',
  method: 'GET',
  path: '/users:export',
  scope: 'users:admin',
  // A backup or a migration reads every user while nothing changes: served in maintenance.
  intent: 'export',
  summary: 'Every user as NDJSON, one per line, streamed',
  responses: {
    200: {
      description:
        'Every user that existed throughout the export, exactly once, one JSON user per line, in id order.',
      content: { [NDJSON]: TEXT },
    },
  },
  async handle(context) {
    const { req, res } = context
    refuseQueryParameters(context.rawQuery, 'the export')
    // Checked before the stream starts: after its first byte no 412 or 304 can be sent.
    if (checkUntagged(context.preconditions, true) === 'not_modified') return { status: 304 }
    if (!(await readyToStream(req))) return STREAMED
    const { store, exportPageSize: pageSize, stallMs } = context.services.bulk
    res.writeHead(200, [...streamHeaders(context), 'content-type', NDJSON])
    if (req.method === 'HEAD') {
      res.end()
      return STREAMED
    }
    // Keyset pages: every user that exists throughout is in exactly one page, whatever changes.
    let after: string | undefined
    for (;;) {
      const page = await store.list({
        filter: {},
        order: 'asc',
        limit: pageSize,
        ...(after === undefined ? {} : { after }),
      })
      // One page at a time in memory, written in pieces of about WRITE_BYTES, each once the
      // socket took the last: the next page is only read once the socket took this one.
      let piece = ''
      for (const [i, record] of page.items.entries()) {
        piece += `${record.json}\n`
        if (piece.length < WRITE_BYTES && i < page.items.length - 1) continue
        const taken = res.write(piece)
        piece = ''
        if (!taken && !(await drained(res, stallMs))) return STREAMED
      }
      if (res.destroyed) return STREAMED
      after = page.resumeAfter ?? page.items.at(-1)?.user.id
      if (!page.hasMore || after === undefined) break
    }
    res.end()
    dropIfUnread(res, stallMs)
    return STREAMED
  },
}
