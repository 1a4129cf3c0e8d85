import { HttpError } from './problem.js'

/** The longest key, in characters after unescaping. */
export const MAX_KEY_LENGTH = 255

type BareItemType =
  | 'Integer'
  | 'Decimal'
  | 'String'
  | 'Token'
  | 'Byte Sequence'
  | 'Boolean'
  | 'Date'
  | 'Display String'

type BareItem = { type: 'String'; value: string } | { type: Exclude<BareItemType, 'String'> }

/**
 * The key of an `Idempotency-Key` header: one Structured Field Item (RFC 9651) whose bare item is a
 * non-empty String of at most 255 characters; its parameters are read and ignored. Undefined when
 * the header is absent; anything else throws `invalid_idempotency_key`.
 */
export function readIdempotencyKey(value: string | string[] | undefined): string | undefined {
  const field = oneFieldLine(value)
  if (field === undefined) return undefined
  const item = parseItemField(field)
  if (item.type !== 'String') refuse(`holds ${article(item.type)} ${item.type}, not a String`)
  validateKeyLength(item.value)
  return item.value
}

function refuse(detail: string): never {
  throw new HttpError('invalid_idempotency_key', `The Idempotency-Key header ${detail}.`)
}

function article(type: BareItemType): string {
  return type === 'Integer' ? 'an' : 'a'
}

// Node gives an array only through headersDistinct, one entry per field line: the key may be sent
// once. Node's own req.headers joins repeated lines with ', ', which the parser refuses as a second
// value after the Item.
function oneFieldLine(value: string | string[] | undefined): string | undefined {
  if (typeof value === 'string' || value === undefined) return value
  if (value.length > 1) refuse('was sent more than once; a request has at most one key')
  return value[0]
}

function validateKeyLength(key: string): void {
  if (key.length === 0) refuse(`holds an empty String; a key has 1 to ${MAX_KEY_LENGTH} characters`)
  if (key.length > MAX_KEY_LENGTH) {
    refuse(`holds a key of ${key.length} characters; a key has 1 to ${MAX_KEY_LENGTH} characters`)
  }
}

// RFC 9651 §4.2 for an Item field: leading and trailing SP are discarded, nothing else may follow.
function parseItemField(field: string): BareItem {
  if (NON_ASCII.test(field)) refuse('holds a character outside ASCII')
  const reader = new FieldReader(field)
  reader.skipSpaces()
  if (reader.atEnd()) refuse('is empty')
  if (reader.peek() === '(') refuse('holds an Inner List, not a String')
  const item = parseBareItem(reader)
  skipParameters(reader)
  reader.skipSpaces()
  if (reader.peek() === ',') refuse('holds more than one value; a request has at most one key')
  if (!reader.atEnd()) refuse(`has text after its value at character ${reader.position + 1}`)
  return item
}

/** Reads a field value one character at a time, as RFC 9651's algorithms consume it. */
class FieldReader {
  readonly #text: string
  #at = 0

  constructor(text: string) {
    this.#text = text
  }

  get position(): number {
    return this.#at
  }

  atEnd(): boolean {
    return this.#at >= this.#text.length
  }

  /** The next character, or '' at the end. */
  peek(): string {
    return this.#text.charAt(this.#at)
  }

  /** Consumes and returns the next character, or '' at the end. */
  take(): string {
    const char = this.peek()
    if (char !== '') this.#at += 1
    return char
  }

  skipSpaces(): void {
    while (this.peek() === ' ') this.#at += 1
  }

  /** Consumes the longest run of characters that pass `test`. */
  takeWhile(test: (char: string) => boolean): string {
    const start = this.#at
    while (!this.atEnd() && test(this.peek())) this.#at += 1
    return this.#text.slice(start, this.#at)
  }
}

const NON_ASCII = /[^\x00-\x7f]/

// Each test sees one character (or '' at the end), so the expressions need no anchors.
const isDigit = (char: string): boolean => char >= '0' && char <= '9'
const isAlpha = (char: string): boolean => /[A-Za-z]/.test(char)
const isLcAlpha = (char: string): boolean => char >= 'a' && char <= 'z'
const isKeyChar = (char: string): boolean => /[a-z0-9_\-.*]/.test(char)
// tchar (RFC 9110) plus ':' and '/'.
const isTokenChar = (char: string): boolean => /[!#$%&'*+\-.^_`|~0-9A-Za-z:/]/.test(char)
const isPrintable = (char: string): boolean => char >= ' ' && char <= '~'

function parseBareItem(reader: FieldReader): BareItem {
  const first = reader.peek()
  if (first === '-' || isDigit(first)) return { type: parseNumber(reader) }
  if (first === '"') return { type: 'String', value: parseString(reader) }
  if (isAlpha(first) || first === '*') {
    reader.takeWhile(isTokenChar)
    return { type: 'Token' }
  }
  if (first === ':') return parseByteSequence(reader)
  if (first === '?') return parseBoolean(reader)
  if (first === '@') return parseDate(reader)
  if (first === '%') return parseDisplayString(reader)
  return refuse(`holds an unknown type of value at character ${reader.position + 1}`)
}

function parseString(reader: FieldReader): string {
  reader.take()
  let output = ''
  while (!reader.atEnd()) {
    const char = reader.take()
    if (char === '\\') {
      const escaped = reader.take()
      if (escaped === '') break
      if (escaped !== '"' && escaped !== '\\') {
        refuse('holds a String with a backslash that escapes neither " nor \\')
      }
      output += escaped
    } else if (char === '"') {
      return output
    } else if (!isPrintable(char)) {
      refuse('holds a String with a character outside printable ASCII')
    } else {
      output += char
    }
  }
  return refuse('holds a String without its closing quote')
}

function skipParameters(reader: FieldReader): void {
  while (reader.peek() === ';') {
    reader.take()
    reader.skipSpaces()
    parseKey(reader)
    if (reader.peek() === '=') {
      reader.take()
      parseBareItem(reader)
    }
  }
}

function parseKey(reader: FieldReader): string {
  const first = reader.peek()
  if (!isLcAlpha(first) && first !== '*') {
    refuse(`has a parameter without a valid key at character ${reader.position + 1}`)
  }
  return reader.takeWhile(isKeyChar)
}

function parseNumber(reader: FieldReader): 'Integer' | 'Decimal' {
  if (reader.peek() === '-') reader.take()
  if (!isDigit(reader.peek())) refuse('holds a minus sign without a number')
  const integerPart = reader.takeWhile(isDigit)
  if (reader.peek() !== '.') {
    if (integerPart.length > 15) refuse('holds an Integer of more than 15 digits')
    return 'Integer'
  }
  if (integerPart.length > 12) refuse('holds a Decimal of more than 12 integer digits')
  reader.take()
  const fraction = reader.takeWhile(isDigit)
  if (fraction.length === 0 || fraction.length > 3) {
    refuse('holds a Decimal without 1 to 3 fractional digits')
  }
  return 'Decimal'
}

function parseByteSequence(reader: FieldReader): BareItem {
  reader.take()
  const content = reader.takeWhile((char) => char !== ':')
  if (reader.take() !== ':') refuse('holds a Byte Sequence without its closing colon')
  if (!isBase64(content)) refuse('holds a Byte Sequence that is not base64')
  return { type: 'Byte Sequence' }
}

// Padding may be left out and pad bits may be non-zero (RFC 9651 asks parsers to accept both);
// what can never decode is a character outside the alphabet, '=' before the end, or a lone sextet.
function isBase64(content: string): boolean {
  const match = /^([A-Za-z0-9+/]*)(={0,2})$/.exec(content)
  const data = match?.[1]
  const padding = match?.[2]
  if (data === undefined || padding === undefined) return false
  if (data.length % 4 === 1) return false
  return padding === '' || (data.length + padding.length) % 4 === 0
}

function parseBoolean(reader: FieldReader): BareItem {
  reader.take()
  const value = reader.take()
  if (value !== '0' && value !== '1') refuse('holds a ? that is not a Boolean ?0 or ?1')
  return { type: 'Boolean' }
}

function parseDate(reader: FieldReader): BareItem {
  reader.take()
  if (parseNumber(reader) !== 'Integer') refuse('holds a Date that is not an Integer')
  return { type: 'Date' }
}

// Only whether the bytes decode matters, not the text (a BOM would be kept or dropped alike).
const utf8 = new TextDecoder('utf-8', { fatal: true })

function parseDisplayString(reader: FieldReader): BareItem {
  reader.take()
  if (reader.take() !== '"') refuse('holds a % that does not start a Display String')
  // Stryker disable next-line ArrayDeclaration: a leading element that is not a byte becomes 0, which is UTF-8 on its own and next to anything
  const bytes: number[] = []
  while (!reader.atEnd()) {
    const char = reader.take()
    if (!isPrintable(char)) {
      refuse('holds a Display String with a character outside printable ASCII')
    }
    if (char === '%') {
      const hex = reader.take() + reader.take()
      // Lowercase only: RFC 9651 refuses uppercase hex digits in a Display String. At most two
      // characters, so the expression needs no anchors.
      if (!/[0-9a-f]{2}/.test(hex)) refuse('holds a Display String with a bad % escape')
      bytes.push(Number.parseInt(hex, 16))
    } else if (char === '"') {
      try {
        utf8.decode(Uint8Array.from(bytes))
      } catch {
        refuse('holds a Display String that is not UTF-8')
      }
      return { type: 'Display String' }
    } else {
      bytes.push(char.charCodeAt(0))
    }
  }
  return refuse('holds a Display String without its closing quote')
}
