import { HttpError } from '../errors.js'

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
const HEX = /^[0-9A-Fa-f]{2}$/

/**
 * Strict percent-decoding (RFC 3986 §2.1): every `%` must start two hex digits, and the bytes must
 * be valid UTF-8. Returns undefined for anything else, so that callers choose their error.
 */
export function percentDecode(text: string, plusIsSpace = false): string | undefined {
  if (!text.includes('%') && !(plusIsSpace && text.includes('+'))) return text
  const bytes: number[] = []
  for (let i = 0; i < text.length; i += 1) {
    const char = text[i] ?? ''
    if (char === '%') {
      const hex = text.slice(i + 1, i + 3)
      if (!HEX.test(hex)) return undefined
      bytes.push(Number.parseInt(hex, 16))
      i += 2
    } else if (plusIsSpace && char === '+') {
      bytes.push(0x20)
    } else {
      for (const byte of Buffer.from(char, 'utf8')) bytes.push(byte)
    }
  }
  try {
    return utf8.decode(Uint8Array.from(bytes))
  } catch {
    return undefined
  }
}

/** Decodes one path parameter; a malformed escape or invalid UTF-8 is a 400. */
export function decodePathParam(name: string, raw: string): string {
  const value = percentDecode(raw)
  if (value === undefined) {
    throw new HttpError('bad_request', `The path parameter ${name} is not valid percent-encoded UTF-8.`)
  }
  return value
}

/** Decodes every parameter of a route match in place (the router makes a fresh object each time). */
export function decodePathParams(params: Record<string, string>): Record<string, string> {
  for (const name in params) {
    const raw = params[name]
    if (raw !== undefined) params[name] = decodePathParam(name, raw)
  }
  return params
}
