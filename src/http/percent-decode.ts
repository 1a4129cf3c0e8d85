import { HttpError } from './problem.js'

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
// The tested text is a slice of at most two characters, so `{2}` alone already spans all of it.
// Stryker disable next-line Regex: either anchor is redundant on a string of at most two characters
const HEX = /^[0-9A-Fa-f]{2}$/

/**
 * Strict percent-decoding (RFC 3986 §2.1): every `%` must start two hex digits, and the bytes must
 * be valid UTF-8. Returns undefined for anything else, so that callers choose their error.
 */
export function percentDecode(text: string, plusIsSpace = false): string | undefined {
  // Stryker disable next-line ConditionalExpression,StringLiteral,LogicalOperator: a fast path only; the full decode below returns the same string for any text without escapes
  if (!text.includes('%') && !(plusIsSpace && text.includes('+'))) return text
  const bytes: number[] = []
  // Stryker disable next-line EqualityOperator: one step past the end reads '', which adds no bytes
  for (let i = 0; i < text.length; i += 1) {
    // Stryker disable next-line StringLiteral: unreachable fallback; text[i] is defined for every i < length
    const char = text[i] ?? ''
    if (char === '%') {
      const hex = text.slice(i + 1, i + 3)
      if (!HEX.test(hex)) return undefined
      bytes.push(Number.parseInt(hex, 16))
      i += 2
    } else if (plusIsSpace && char === '+') {
      bytes.push(0x20)
    } else {
      // Stryker disable next-line StringLiteral: Buffer.from defaults an empty encoding name to UTF-8
      for (const byte of Buffer.from(char, 'utf8')) bytes.push(byte)
    }
  }
  // biome-ignore format: the Stryker directive must stay on the line before `catch`
  try {
    return utf8.decode(Uint8Array.from(bytes))
  }
  // Stryker disable next-line BlockStatement: an empty catch block also returns undefined
  catch {
    return undefined
  }
}

/** Decodes one path parameter; a malformed escape or invalid UTF-8 is a 400. */
export function decodePathParam(name: string, raw: string): string {
  const value = percentDecode(raw)
  if (value === undefined) {
    throw new HttpError(
      'bad_request',
      `The path parameter ${name} is not valid percent-encoded UTF-8.`,
    )
  }
  return value
}

/** Decodes every parameter of a route match in place (the router makes a fresh object each time). */
export function decodePathParams(params: Record<string, string>): Record<string, string> {
  for (const name in params) {
    const raw = params[name]
    // Stryker disable next-line ConditionalExpression: a for-in key of a Record<string, string> always has a value; the check only satisfies noUncheckedIndexedAccess
    if (raw !== undefined) params[name] = decodePathParam(name, raw)
  }
  return params
}
