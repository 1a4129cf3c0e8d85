import { randomUUID } from 'node:crypto'

const SANE = /^[A-Za-z0-9._-]{1,128}$/

/** The caller's X-Request-Id when it is sane (≤ 128 of [A-Za-z0-9._-]), else a new one. */
export function readRequestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && SANE.test(header) ? header : randomUUID()
}
