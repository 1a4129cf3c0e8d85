import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http'

import { isBehindLastRequest, serveNoneAfter } from './lingering-close.js'

/**
 * The `node:http` server the service answers on, with six of Node's defaults changed:
 * - No Host check of its own (`requireHostHeader: false`), and no 417 of its own to an `Expect`
 *   other than 100-continue: Node's answers are bare status lines; the service refuses both as
 *   problem+json (request-head.ts).
 * - Every header line is kept (`maxHeadersCount` 0): Node drops the lines past the 2,000th without
 *   a word, so a second Authorization or Host hidden behind 2,000 others would pass the check of
 *   repeated lines. The 16 KiB limit on the whole head still bounds them (431).
 * - `Expect: 100-continue` is answered with 100 only when the service begins to read the body
 *   (RFC 9110 §10.1.1). Node sends it at once; a request refused from its head alone (401, 403,
 *   413 by its Content-Length, 415…) then got a 100 first, and the client sent a body only to have
 *   it discarded. Without the 100, the client learns the final answer before it sends anything.
 * - A request that asks to switch protocols is the last its connection serves (closeAfterUpgrade).
 * - The headers' time-out is at most the request's: Node's check swaps the two when the headers'
 *   is the longer, and a slow body then had the headers' time (10 s by default) instead.
 */
/** The time-outs and the connection cap of the server, in ms (docs/configuration.md). */
export interface ServerLimits {
  readonly connectionCheckMs: number
  readonly headersTimeoutMs: number
  readonly requestTimeoutMs: number
  readonly keepAliveTimeoutMs: number
  readonly maxConnections: number
}

export function createHttpServer(listener: RequestListener, limits: ServerLimits): Server {
  const handler: RequestListener = (req, res) => {
    closeAfterUpgrade(req, res)
    listener(req, res)
  }
  const server = createServer(
    { connectionsCheckingInterval: limits.connectionCheckMs, requireHostHeader: false },
    handler,
  )
  server.maxHeadersCount = 0
  server.headersTimeout = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs)
  server.requestTimeout = limits.requestTimeoutMs
  server.keepAliveTimeout = limits.keepAliveTimeoutMs
  server.maxConnections = limits.maxConnections
  server.on('checkContinue', (req, res) => {
    awaitingContinue.add(res)
    // Both readers of a body (a JSON body, an import's lines) read with a 'data' listener, which
    // resumes the request; an early answer's discarding of the body resumes it after the answer.
    req.once('resume', () => {
      sendContinue(res)
    })
    handler(req, res)
  })
  server.on('checkExpectation', handler)
  return server
}

/** Responses whose requests asked for a 100 that has not been sent. */
const awaitingContinue = new WeakSet<ServerResponse>()

/**
 * Sends the 100 the request asked for (`Expect: 100-continue`), once, unless its answer has begun:
 * a route that writes its head before it reads the body (an import) calls this first.
 */
export function sendContinue(res: ServerResponse): void {
  if (!awaitingContinue.delete(res) || res.headersSent) return
  res.writeContinue()
}

/**
 * RFC 9110 §7.8 lets a server ignore Upgrade and go on with HTTP/1.1. Node's parser stops at a
 * request that asks to switch (`Connection: upgrade` and an `Upgrade` field) and, with no
 * 'upgrade' listener, serves it as a plain request but drops the bytes that came with it: a
 * request pipelined behind it was never answered, and its client waited for the keep-alive
 * time-out. Its answer says `Connection: close` instead, so the client sends the rest again.
 */
function closeAfterUpgrade(req: IncomingMessage, res: ServerResponse): void {
  const { connection, upgrade } = req.headers
  if (upgrade === undefined || connection === undefined || isBehindLastRequest(req)) return
  if (!connection.split(',').some((option) => option.trim().toLowerCase() === 'upgrade')) return
  serveNoneAfter(req)
  // For the answers written by their handlers (a stream, an export) as for the others.
  res.shouldKeepAlive = false
}
