import { randomBytes } from 'node:crypto'

const SANE = /^[A-Za-z0-9._-]{1,128}$/
// A random prefix per process and a counter: unique, sane, and cheaper than a UUID per request.
const PREFIX = `${randomBytes(9).toString('base64url')}.`
let counter = 0

/** The caller's X-Request-Id when it is sane (≤ 128 of [A-Za-z0-9._-]), else a new one. */
export function readRequestId(header: string | string[] | undefined): string {
  if (typeof header === 'string' && SANE.test(header)) return header
  counter += 1
  return PREFIX + counter.toString(36)
}
