/**
 * The token of an `Authorization: Bearer …` header; undefined when there is no header, another
 * scheme or an empty token (all three are "no token" to RFC 6750). Anything after the scheme is
 * returned as sent, so that a malformed token is refused as invalid rather than missing.
 */
export function readBearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  const match = /^Bearer(?:[ \t]+(.*))?$/i.exec(header.trim())
  const token = match?.[1]?.trim()
  return token === undefined || token === '' ? undefined : token
}
