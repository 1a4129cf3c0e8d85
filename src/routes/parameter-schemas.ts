import { TRIMMED_CLASS } from '../users/text-rules.js'

/*
 * Schemas of query and header parameters, each allowing no more than the parser takes, so that a
 * tool generating requests from the OpenAPI document is not refused for a reason it was told.
 * The parsers trim with `trim()` and refuse NUL; a lone surrogate cannot be sent as UTF-8 at all.
 * Patterns avoid `\s` and `\p{…}` (see openapi/user-schemas.ts).
 */

const SPACE = `[${TRIMMED_CLASS}]*`
const NOT_SENDABLE = '\\u0000\\uD800-\\uDFFF'

/** A value that is not blank once trimmed and holds no NUL or lone surrogate. */
export const NOT_BLANK = {
  minLength: 1,
  pattern: `^[^${NOT_SENDABLE}]*[^${TRIMMED_CLASS}${NOT_SENDABLE}][^${NOT_SENDABLE}]*$`,
} as const

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'

/** A user id as the service makes and takes it: a canonical lower-case UUID. */
export const USER_ID = {
  type: 'string',
  format: 'uuid',
  pattern: `^${UUID}$`,
  minLength: 36,
  maxLength: 36,
} as const

/** A comma list of items matching `item` (a pattern without anchors), each trimmed, at most `max`. */
export function commaList(item: string, max?: number): { type: 'string'; pattern: string } {
  const one = `${SPACE}(?:${item})${SPACE}`
  const more = max === undefined ? '*' : `{0,${max - 1}}`
  return { type: 'string', pattern: `^${one}(?:,${one})${more}$` }
}

/** A comma list of user ids, at most `max`. */
export function userIdList(max: number): { type: 'string'; pattern: string } {
  return commaList(UUID, max)
}
