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

/** Writes a reply; HEAD and bodiless statuses get the headers alone (Node drops the body). */
export function sendReply(
  res: ServerResponse, reply: Reply, headers: Readonly<Record<string, string>>,
): void {
  res.statusCode = reply.status
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value)
  if (reply.headers !== undefined) {
    for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value)
  }
  if (reply.body === undefined || reply.status === 204 || reply.status === 304) {
    res.end()
    return
  }
  res.setHeader('content-type', reply.contentType ?? 'application/json')
  res.setHeader('content-length', Buffer.byteLength(reply.body))
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
