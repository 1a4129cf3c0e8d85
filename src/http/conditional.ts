/**
 * Conditional requests (RFC 9110 §13): If-Match compares strongly, If-None-Match weakly; `*`
 * matches any current representation. `etag` is the strong tag of the current one.
 */
export function matchesIfMatch(header: string, etag: string): boolean {
  if (header.trim() === '*') return true
  return splitTags(header).some((tag) => tag === etag)
}

export function matchesIfNoneMatch(header: string, etag: string): boolean {
  if (header.trim() === '*') return true
  return splitTags(header).some((tag) => stripWeak(tag) === etag)
}

function splitTags(header: string): string[] {
  return header.split(',').map((tag) => tag.trim()).filter((tag) => tag !== '')
}

function stripWeak(tag: string): string {
  return tag.startsWith('W/') ? tag.slice(2) : tag
}
