import type { ServerResponse } from 'node:http'

import type { HttpError } from '../errors.js'

/** What a handler answers: a status, JSON text (already serialised) and extra headers. */
export interface Reply {
  readonly status: number
  readonly body?: string
  readonly contentType?: string
  readonly headers?: Readonly<Record<string, string>>
}

export const PROBLEM_TYPE_PREFIX = 'urn:user-service:problem:'

/**
 * Writes a reply with one writeHead call (cheaper than a setHeader per header); HEAD and bodiless
 * statuses get the headers alone (Node drops the body of a HEAD).
 */
export function sendReply(
  res: ServerResponse, reply: Reply, headers: Readonly<Record<string, string>>,
): void {
  const all: Record<string, string | number> = reply.headers === undefined ? { ...headers } : { ...headers, ...reply.headers }
  if (reply.body === undefined || reply.status === 204 || reply.status === 304) {
    res.writeHead(reply.status, all)
    res.end()
    return
  }
  all['content-type'] = reply.contentType ?? 'application/json'
  all['content-length'] = Buffer.byteLength(reply.body)
  res.writeHead(reply.status, all)
  res.end(reply.body)
}

/** The one place an error becomes an answer: application/problem+json (RFC 9457). */
export function toProblemReply(error: HttpError, requestId: string): Reply {
  const problem = {
    type: `${PROBLEM_TYPE_PREFIX}${error.code}`,
    title: error.title,
    status: error.status,
    detail: error.detail,
    code: error.code,
    requestId,
    ...(error.errors === undefined ? {} : { errors: error.errors }),
  }
  return {
    status: error.status,
    body: JSON.stringify(problem),
    contentType: 'application/problem+json',
    headers: error.headers,
  }
}
