/**
 * Lists (RFC 9110 §5.6.1) and parameters (RFC 9110 §5.6.6), for the readers of Content-Type and
 * Accept: a quoted-string (RFC 9110 §5.6.4) is one value, so a `,` or `;` inside one ends nothing.
 */

const QUOTE = '"'
const BACKSLASH = '\\'

/**
 * `text` cut at each `delimiter` that is not inside a quoted-string. One opens only where a
 * parameter's value starts (right after `=`), and a quoted-pair (`\"`) never closes it. Text that
 * leaves one unclosed is malformed: it is cut at every delimiter, so that a `;charset=` in it is
 * still seen, as something in front that reads it so would see it.
 */
export function splitOutsideQuotes(text: string, delimiter: ',' | ';'): string[] {
  const parts: string[] = []
  let start = 0
  let quoted = false
  for (let at = 0; at < text.length; at += 1) {
    const char = text[at]
    if (quoted && char === BACKSLASH) at += 1
    else if (char === QUOTE && (quoted || text[at - 1] === '=')) quoted = !quoted
    else if (!quoted && char === delimiter) {
      parts.push(text.slice(start, at))
      start = at + 1
    }
  }
  if (quoted) return text.split(delimiter)
  parts.push(text.slice(start))
  return parts
}

/** A parameter's value: a token as written, a quoted-string without its quotes and escapes. */
export function unquote(value: string): string {
  if (value.length < 2 || !value.startsWith(QUOTE) || !value.endsWith(QUOTE)) return value
  return value.slice(1, -1).replace(/\\(.)/gs, '$1')
}
