const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const COMMA = 0x2c

/**
 * The first member name that one object of this JSON text holds twice, or undefined. JSON.parse
 * keeps the last of them silently, where a proxy or a firewall in front may have read the first:
 * such a body is refused instead, as I-JSON (RFC 7493 §2.3) asks. Names are compared as the
 * strings they stand for, so `"a"` and `"\u0061"` are one name. `text` must be valid JSON
 * (JSON.parse took it): the walk relies on that.
 */
export function repeatedName(text: string): string | undefined {
  // Per open object or array, the names seen so far; undefined for an array.
  const open: (Set<string> | undefined)[] = []
  let nameNext = false
  for (let at = 0; at < text.length; at += 1) {
    const char = text.charCodeAt(at)
    if (char === QUOTE) {
      let end = at + 1
      let escaped = false
      for (;;) {
        const next = text.charCodeAt(end)
        if (next === QUOTE) break
        if (next === BACKSLASH) {
          escaped = true
          end += 2
        } else end += 1
      }
      const names = open.at(-1)
      if (nameNext && names !== undefined) {
        const name = escaped
          ? (JSON.parse(text.slice(at, end + 1)) as string)
          : text.slice(at + 1, end)
        if (names.has(name)) return name
        names.add(name)
        nameNext = false
      }
      at = end
    } else if (char === OPEN_OBJECT) {
      open.push(new Set())
      nameNext = true
    } else if (char === OPEN_ARRAY) {
      open.push(undefined)
    } else if (char === CLOSE_OBJECT || char === CLOSE_ARRAY) {
      open.pop()
    } else if (char === COMMA) {
      nameNext = open.at(-1) !== undefined
    }
  }
  return undefined
}

/** What a 400 says of a name one object holds twice (cut short: a name can be kilobytes long). */
export function repeatedNameDetail(name: string): string {
  const shown = name.length > 64 ? `${name.slice(0, 64)}…` : name
  return `The JSON has the name ${JSON.stringify(shown)} twice in one object: each name may appear once.`
}
