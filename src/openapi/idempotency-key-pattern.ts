import { MAX_KEY_LENGTH } from '../http/idempotency-key.js'

/*
 * The Idempotency-Key field as a pattern: what http/idempotency-key.ts takes, in RFC 9651's
 * grammar for an Item, so that a generator that trusts the schema sends no key the parser refuses.
 * Every class is ASCII and written out: the pattern reads alike with and without the u flag and in
 * engines without Unicode classes.
 */

// A String's characters: printable ASCII but " and \, or one of them escaped.
const STRING_CHAR = String.raw`[ !#-\[\]-~]|\\["\\]`
const NUMBER = String.raw`-?(?:[0-9]{1,12}\.[0-9]{1,3}|[0-9]{1,15})`
// tchar (RFC 9110) plus ':' and '/', after a letter or '*'.
const TOKEN = "[A-Za-z*][!#$%&'*+.^_`|~0-9A-Za-z:/-]*"
// Base64 whose padding, when sent, completes the last quantum; it may also be left out.
const BYTES = ':(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?:'
const BOOLEAN = String.raw`\?[01]`
const DATE = '@-?[0-9]{1,15}'
// A Display String's bytes are lower-case %xx escapes that decode as UTF-8, or printable ASCII
// but " and %: one pattern per well-formed sequence (no overlong form, no surrogate, ≤ U+10FFFF).
const CONTINUATION = '%[89ab][0-9a-f]'
const UTF8_SEQUENCES = [
  '%[0-7][0-9a-f]',
  `%(?:c[2-9a-f]|d[0-9a-f])${CONTINUATION}`,
  `%e0%[ab][0-9a-f]${CONTINUATION}`,
  `%e[1-9a-cef](?:${CONTINUATION}){2}`,
  `%ed%[89][0-9a-f]${CONTINUATION}`,
  `%f0%[9ab][0-9a-f](?:${CONTINUATION}){2}`,
  `%f[1-3](?:${CONTINUATION}){3}`,
  `%f4%8[0-9a-f](?:${CONTINUATION}){2}`,
]
const DISPLAY_STRING = `%"(?:[ !#$&-~]|${UTF8_SEQUENCES.join('|')})*"`
const BARE_ITEM = [NUMBER, `"(?:${STRING_CHAR})*"`, TOKEN, BYTES, BOOLEAN, DATE, DISPLAY_STRING]
const PARAMETER = `; *[a-z*][a-z0-9_.*-]*(?:=(?:${BARE_ITEM.join('|')}))?`

/**
 * One String of 1 to MAX_KEY_LENGTH characters, then any parameters (read and ignored), with
 * spaces around the whole: a list, another type, a longer key or text after the item does not
 * match.
 */
export const IDEMPOTENCY_KEY_PATTERN = `^ *"(?:${STRING_CHAR}){1,${MAX_KEY_LENGTH}}"(?:${PARAMETER})* *$`
