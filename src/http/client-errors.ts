import { type IncomingMessage, STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'

import type { Logger } from '../log/logger.js'
import { closeInStages } from './lingering-close.js'
import { type ErrorCode, HttpError } from './problem.js'
import { isAnsweringUnfinished, whenSettled } from './request-accounting.js'
import { readRequestId } from './request-id.js'
import { timeOutRequest } from './request-timeout.js'
import { toProblemReply } from './respond.js'

/** What Node's HTTP parser and connection checks raise, as the service's own answers. */
const CLIENT_ERRORS: Readonly<Record<string, { code: ErrorCode; detail: string }>> = {
  HPE_HEADER_OVERFLOW: {
    code: 'headers_too_large',
    detail: 'The request line and headers together are larger than this server takes.',
  },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: {
    code: 'payload_too_large',
    detail: 'The chunk extensions of the request body are too large.',
  },
  ERR_HTTP_REQUEST_TIMEOUT: {
    code: 'request_timeout',
    detail: 'The request did not arrive in time.',
  },
}

const handled = new WeakSet<Socket>()

/**
 * The server's `clientError` listener: a request Node could not parse (or that did not arrive in
 * time) gets a problem+json answer where the connection still allows one, then the connection is
 * closed in stages. Without it Node answers with a bare status line.
 */
export function createClientErrorHandler(logger: Logger): (error: Error, socket: Socket) => void {
  return (error, socket) => {
    // The parser reports the same fault again for every later chunk: answer it once.
    if (handled.has(socket)) return
    handled.add(socket)
    const nodeCode = readCode(error)
    if (nodeCode === 'ECONNRESET' || !socket.writable) {
      socket.destroy()
      return
    }
    const known = CLIENT_ERRORS[nodeCode]
    const reason = readReason(error)
    const problem = new HttpError(
      known?.code ?? 'bad_request',
      known?.detail ??
        `The request is not valid HTTP/1.1${reason === undefined ? '' : ` (${reason})`}.`,
    )
    // A request whose head was read answers its own time-out: its id, its log line, its close.
    if (nodeCode === 'ERR_HTTP_REQUEST_TIMEOUT' && timeOutRequest(socket, problem)) return
    // Requests read before the bad one are answered first, in order; the refusal follows them.
    whenSettled(socket, () => {
      if (!socket.writable || isAnsweringUnfinished(socket)) {
        socket.destroy()
        return
      }
      const requestId = readRequestId(undefined)
      refuseOnSocket(socket, problem, requestId)
      logger.info('refused a request the HTTP parser could not take', {
        requestId,
        status: problem.status,
        code: problem.code,
        parserError: nodeCode,
      })
    })
  }
}

/**
 * The server's `connect` listener. A CONNECT asks for a tunnel, which only a proxy gives; Node
 * hands its connection over raw and, without a listener, closes it without a word. It gets a
 * 400 as problem+json instead, after the answers of the requests pipelined before it, and the
 * connection closes: every byte after its head belongs to the tunnel it asked for, not to a next
 * request.
 */
export function createConnectRefusal(logger: Logger): (req: IncomingMessage) => void {
  // Node's socket argument is typed as a bare stream; `req.socket` is the same socket.
  return (req) => {
    const socket = req.socket
    // Node took its own listeners off the socket with the hand-over: without one, a reset while
    // the answer is written would be an uncaught error, and the process would exit.
    socket.on('error', () => {
      socket.destroy()
    })
    const requestId = readRequestId(req.headers['x-request-id'])
    const problem = new HttpError('bad_request', 'This service is not a proxy: it opens no tunnel.')
    // The hand-over comes as soon as its head is parsed, while a request before it on the
    // connection may still be at work: written now, the 400 would go out as that one's answer.
    whenSettled(socket, () => {
      if (!socket.writable) {
        socket.destroy()
        return
      }
      refuseOnSocket(socket, problem, requestId)
      logger.info('refused a CONNECT request', {
        requestId,
        status: problem.status,
        code: problem.code,
      })
    })
  }
}

/** Writes the problem as a whole HTTP/1.1 answer on a connection Node no longer parses, and closes it. */
function refuseOnSocket(socket: Socket, problem: HttpError, requestId: string): void {
  const reply = toProblemReply(problem, requestId)
  const body = reply.body ?? ''
  socket.write(
    [
      `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? ''}`,
      `content-type: ${reply.contentType ?? 'application/problem+json'}`,
      `content-length: ${Buffer.byteLength(body)}`,
      // RFC 9110 §6.6.1: Date on every 2xx, 3xx and 4xx answer; Node's own answers carry it.
      `date: ${new Date().toUTCString()}`,
      `x-request-id: ${requestId}`,
      'cache-control: no-store',
      'connection: close',
      '',
      body,
    ].join('\r\n'),
  )
  closeInStages(socket)
}

function readCode(error: Error): string {
  const code: unknown = (error as { code?: unknown }).code
  return typeof code === 'string' ? code : ''
}

/** llhttp's short, fixed reason ("Invalid method encountered"); never request bytes. */
function readReason(error: Error): string | undefined {
  const reason: unknown = (error as { reason?: unknown }).reason
  return typeof reason === 'string' && /^[\w .,'-]{1,80}$/.test(reason) ? reason : undefined
}
