/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the trace id of a `traceparent`
 * header, `version-traceid-parentid-flags` in lowercase hex, or undefined when there is none or it
 * is not valid. A bad header is ignored, never an error: the request is served as if untraced.
 */

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}/
const VERSION_00_LENGTH = 55
const ZERO_TRACE_ID = '0'.repeat(32)
const ZERO_PARENT_ID = '0'.repeat(16)

export function readTraceId(header: string | string[] | undefined): string | undefined {
  // Node joins repeated headers it does not know with ', ': a repeated traceparent is then too
  // long for version 00, and the spec says to ignore it.
  if (typeof header !== 'string' || header.length < VERSION_00_LENGTH || !TRACEPARENT.test(header))
    return undefined
  const version = header.slice(0, 2)
  if (version === 'ff') return undefined
  if (version === '00') {
    if (header.length !== VERSION_00_LENGTH) return undefined
  } else if (header.length > VERSION_00_LENGTH && header[VERSION_00_LENGTH] !== '-') {
    // A later version may add fields, but only after a dash; the first four are read as in 00.
    return undefined
  }
  const traceId = header.slice(3, 35)
  if (traceId === ZERO_TRACE_ID || header.slice(36, 52) === ZERO_PARENT_ID) return undefined
  return traceId
}
