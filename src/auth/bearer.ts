/**
 * The token of an `Authorization: Bearer …` header; undefined when there is no header, another
 * scheme or an empty token (all three are "no token" to RFC 6750). Anything after the scheme is
 * returned as sent, so that a malformed token is refused as invalid rather than missing.
 */
export function readBearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  const value = header.trim()
  // A plain comparison instead of a regular expression: this runs on every request.
  if (value.slice(0, 6).toLowerCase() !== 'bearer') return undefined
  // A space or a tab after the scheme. An empty token has none: `Bearer` with nothing but white
  // space after it was trimmed to `Bearer`, whose next character is NaN.
  const separator = value.charCodeAt(6)
  if (separator !== 0x20 && separator !== 0x09) return undefined
  // Not empty: the value ends in a character that is not white space.
  return value.slice(7).trim()
}
