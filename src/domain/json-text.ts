const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d

/**
 * The member names of the object at `path` (a member name per level, from the top object) in the
 * order the text writes them, each once; undefined when there is no object there. JSON.parse
 * loses that order for names that are array indices ("0", "12"): they come first in every object.
 * `text` must be JSON that JSON.parse took: the walk relies on it.
 */
export function namesInTextOrder(text: string, path: readonly string[]): string[] | undefined {
  const start = valueStart(text, path)
  if (start === undefined || text.charCodeAt(start) !== OPEN_OBJECT) return undefined
  const names = new Set<string>()
  eachMember(text, start, (name) => {
    names.add(name)
  })
  return [...names]
}

/**
 * The first member name that one object of this JSON text holds twice, or undefined. JSON.parse
 * keeps the last of them silently, where a proxy or a firewall in front may have read the first:
 * such a body is refused instead, as I-JSON (RFC 7493 §2.3) asks. Names are compared as the
 * strings they stand for, so `"a"` and `"\u0061"` are one name. `text` must be JSON that
 * JSON.parse took: the walk relies on it.
 */
export function repeatedName(text: string): string | undefined {
  // Per open object or array, the names seen so far; undefined for an array.
  const open: (Set<string> | undefined)[] = []
  let nameNext = false
  for (let at = 0; at < text.length; at += 1) {
    const char = text.charCodeAt(at)
    if (char === QUOTE) {
      const end = stringEnd(text, at)
      const names = open.at(-1)
      if (nameNext && names !== undefined) {
        const name = readString(text, at, end)
        if (names.has(name)) return name
        names.add(name)
        nameNext = false
      }
      at = end - 1
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

/** The text of the value at `path`, as written; undefined when there is none. */
export function valueText(text: string, path: readonly string[]): string | undefined {
  const start = valueStart(text, path)
  return start === undefined ? undefined : text.slice(start, skipValue(text, start))
}

/** Where the value at `path` starts; as JSON.parse does, the last of a name given twice wins. */
function valueStart(text: string, path: readonly string[]): number | undefined {
  let at: number | undefined = skipSpace(text, 0)
  for (const wanted of path) {
    if (at === undefined || text.charCodeAt(at) !== OPEN_OBJECT) return undefined
    let found: number | undefined
    eachMember(text, at, (name, value) => {
      if (name === wanted) found = value
    })
    at = found
  }
  return at
}

/** Calls `visit` with each member's name and where its value starts, of the object at `at`. */
function eachMember(text: string, at: number, visit: (name: string, value: number) => void): void {
  let next = skipSpace(text, at + 1)
  while (text.charCodeAt(next) === QUOTE) {
    const end = stringEnd(text, next)
    const name = readString(text, next, end)
    // Past the colon that follows the name.
    const value = skipSpace(text, skipSpace(text, end) + 1)
    visit(name, value)
    next = skipSpace(text, skipValue(text, value))
    if (text.charCodeAt(next) !== COMMA) return
    next = skipSpace(text, next + 1)
  }
}

/** Where the value at `at` ends (the index just past it). */
function skipValue(text: string, at: number): number {
  const first = text.charCodeAt(at)
  if (first === QUOTE) return stringEnd(text, at)
  if (first !== OPEN_OBJECT && first !== OPEN_ARRAY) {
    let end = at
    while (end < text.length && !isEnd(text.charCodeAt(end))) end += 1
    return end
  }
  let depth = 0
  for (let end = at; end < text.length; end += 1) {
    const char = text.charCodeAt(end)
    if (char === QUOTE) end = stringEnd(text, end) - 1
    else if (char === OPEN_OBJECT || char === OPEN_ARRAY) depth += 1
    else if (char === CLOSE_OBJECT || char === CLOSE_ARRAY) {
      depth -= 1
      if (depth === 0) return end + 1
    }
  }
  return text.length
}

/** The index just past the closing quote of the string that opens at `at`. */
function stringEnd(text: string, at: number): number {
  let end = at + 1
  for (;;) {
    const char = text.charCodeAt(end)
    if (char === QUOTE || Number.isNaN(char)) return end + 1
    end += char === BACKSLASH ? 2 : 1
  }
}

function readString(text: string, start: number, end: number): string {
  const raw = text.slice(start + 1, end - 1)
  return raw.includes('\\') ? (JSON.parse(text.slice(start, end)) as string) : raw
}

function skipSpace(text: string, at: number): number {
  let next = at
  while (isSpace(text.charCodeAt(next))) next += 1
  return next
}

function isSpace(char: number): boolean {
  return char === 0x20 || char === 0x0a || char === 0x0d || char === 0x09
}

function isEnd(char: number): boolean {
  return char === COMMA || char === CLOSE_OBJECT || char === CLOSE_ARRAY || isSpace(char)
}

/** Whether a parsed JSON value is an object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
