import { createHash } from 'node:crypto'

import { requirePreconditions } from '../../domain/preconditions.js'
import { percentDecode } from '../../http/percent-decode.js'
import { HttpError } from '../../http/problem.js'
import { type Route, type RouteContext, STREAMED } from '../route.js'
import { API_ROUTE, TEXT } from '../route-defaults.js'
import { type PageFile, readPageFiles } from './page-files.js'

/**
 * The page's policy (docs/admin-page.md): everything from this origin, nothing inline, no eval,
 * no plugins, no frames, no form posts.
 */
export const ADMIN_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
  "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/** A file of the page with its strong ETag: a digest of its bytes, the same on every replica. */
interface TaggedFile extends PageFile {
  readonly etag: string
}

let files: ReadonlyMap<string, TaggedFile> | undefined

function tagged(file: PageFile): TaggedFile {
  return { ...file, etag: `"${createHash('sha256').update(file.body).digest('base64url')}"` }
}

/** Read once, at the first request for the page; the files do not change while it runs. */
function pageFiles(): ReadonlyMap<string, TaggedFile> {
  files ??= new Map([...readPageFiles()].map(([key, file]) => [key, tagged(file)]))
  return files
}

function pageFile(name: string): TaggedFile {
  const file = pageFiles().get(name)
  if (file === undefined) throw new HttpError('not_found', 'There is nothing at this path.')
  return file
}

/**
 * Sends a file with the page's own headers: `no-cache` (revalidate every time, so an upgrade is
 * seen at once) instead of the API's `no-store`, hence written here rather than as a Reply. The
 * ETag makes that revalidation a 304 without the file while it has not changed (RFC 9110 §13).
 */
function send(context: RouteContext, file: TaggedFile): typeof STREAMED {
  const { req, res, requestId, cors } = context
  const fresh = requirePreconditions(context.preconditions, file.etag, true) === 'pass'
  const headers = [
    'x-request-id',
    requestId,
    'etag',
    file.etag,
    'cache-control',
    'no-cache',
    'content-security-policy',
    ADMIN_CSP,
    'x-content-type-options',
    'nosniff',
    'referrer-policy',
    'no-referrer',
    // CORS for an allowed origin, and the rate limits' fields: every counted answer has them.
    ...(cors ?? []),
  ]
  if (!fresh) {
    res.writeHead(304, headers)
    res.end()
    return STREAMED
  }
  res.writeHead(200, [
    ...headers,
    'content-type',
    file.type,
    'content-length',
    String(file.body.length),
  ])
  if (req.method === 'HEAD') res.end()
  else res.end(file.body)
  return STREAMED
}

const PAGE_ROUTE = {
  ...API_ROUTE,
  method: 'GET',
  scope: undefined,
  tag: 'service',
  tagged: true,
  errors: [404],
} as const

const NOT_MODIFIED = { description: 'Not modified (If-None-Match matched the ETag); no body.' }

/** The page itself has one address, `/admin`, the one its relative URLs are written for. */
function servedFile(name: string): boolean {
  return name !== 'index.html' && pageFiles().has(name)
}

/** `GET /admin`: the page itself; it holds no data, so it needs no token. */
export const getAdminPage: Route = {
  ...PAGE_ROUTE,
  operationId: 'getAdminPage',
  path: '/admin',
  summary: 'The admin page (docs/admin-page.md)',
  // Not built (run from the sources before `npm run build`): no page, an unknown path.
  exists: () => pageFiles().has('index.html'),
  responses: {
    200: { description: 'The page.', content: { 'text/html': TEXT } },
    304: NOT_MODIFIED,
  },
  handle: (context) => send(context, pageFile('index.html')),
}

/** `GET /admin/{file}`: the scripts, styles and images the page loads. */
export const getAdminFile: Route = {
  ...PAGE_ROUTE,
  operationId: 'getAdminFile',
  path: '/admin/{file}',
  summary: 'A script, style sheet or image of the admin page',
  // A file the page does not have is a path that does not exist: a route 404 that the rate
  // limits never count, however its name is written. A bad encoding is the handler's 400.
  exists: ({ file = '' }) => {
    const name = percentDecode(file)
    return name === undefined || servedFile(name)
  },
  responses: { 200: { description: 'The file.' }, 304: NOT_MODIFIED },
  handle: (context) => {
    const name = context.params['file'] ?? ''
    if (!servedFile(name)) throw new HttpError('not_found', 'There is nothing at this path.')
    return send(context, pageFile(name))
  },
}
