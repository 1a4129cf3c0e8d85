import { toJsonNumber, toJsonString } from './json-line.js'

/** The fields of the per-request line, in the order they are written. */
export interface RequestLogEntry {
  requestId: string
  method: string
  path: string
  status: number
  durationMs: number
  sub: string | undefined
  traceId?: string | undefined
}

/** Byte for byte what formatLine gives for `info('request', entry)`, without building an object. */
export function formatRequestLine(time: string, entry: RequestLogEntry): string {
  // time comes from toISOString: ASCII that never needs escaping.
  let line = `{"time":"${time}","level":"info","msg":"request"`
  line += `,"requestId":${toJsonString(entry.requestId)}`
  line += `,"method":${toJsonString(entry.method)},"path":${toJsonString(entry.path)}`
  line += `,"status":${toJsonNumber(entry.status)},"durationMs":${toJsonNumber(entry.durationMs)}`
  if (entry.sub !== undefined) line += `,"sub":${toJsonString(entry.sub)}`
  if (entry.traceId !== undefined) line += `,"traceId":${toJsonString(entry.traceId)}`
  return `${line}}\n`
}
