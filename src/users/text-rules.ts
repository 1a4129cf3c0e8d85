import type { FieldError } from '../domain/errors.js'
import type { FieldErrors } from './field-errors.js'

export type Problem = Omit<FieldError, 'pointer'>

export const ILL_FORMED: Problem = {
  code: 'invalid_characters',
  message: 'Strings must be well-formed Unicode: this one holds a lone surrogate.',
}

// In `u` mode a lone surrogate matches and a valid pair (one code point) does not.
const LONE_SURROGATE = /\p{Surrogate}/u

/**
 * The characters `trim()` removes (ECMAScript's white space and line terminators), as the body of
 * a character class written without `\s`, which other regular-expression engines read otherwise.
 */
export const TRIMMED_CLASS =
  '\\t-\\r \\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\uFEFF'

/**
 * The characters that leave a text blank to the eye: Unicode's White_Space and
 * Default_Ignorable_Code_Point (Unicode 17), listed rather than read from the engine's property
 * tables, so that the rule does not move with the Node that runs it and the OpenAPI patterns can
 * carry it to engines without `\p{…}`. As the body of a character class; these are the ones up to
 * U+FFFF, which any engine reads alike.
 */
export const INVISIBLE_BMP_CLASS =
  '\\t-\\r \\u0085\\u00A0\\u00AD\\u034F\\u061C\\u115F\\u1160\\u1680\\u17B4\\u17B5\\u180B-\\u180F' +
  '\\u2000-\\u200F\\u2028-\\u202F\\u205F-\\u206F\\u3000\\u3164\\uFE00-\\uFE0F\\uFEFF\\uFFA0\\uFFF0-\\uFFF8'

/**
 * The invisible characters above U+FFFF (shorthand format controls, musical formatting, tags). A
 * pattern that runs both with and without ECMAScript's `u` flag and in Python cannot name a range
 * of them, so the OpenAPI patterns leave them out: docs/api.md says so.
 */
export const INVISIBLE_ASTRAL_CLASS =
  '\\u{1BCA0}-\\u{1BCA3}\\u{1D173}-\\u{1D17A}\\u{E0000}-\\u{E0FFF}'

const INVISIBLE = new RegExp(`^[${INVISIBLE_BMP_CLASS}${INVISIBLE_ASTRAL_CLASS}]*$`, 'u')

/** A lone surrogate anywhere under a field refuses it, whatever else is wrong with it. */
export function addIfIllFormed(
  pointer: string,
  errors: FieldErrors,
  ...values: unknown[]
): boolean {
  if (!values.some(hasLoneSurrogate)) return false
  errors.add(pointer, ILL_FORMED.code, ILL_FORMED.message)
  return true
}

/** True when a string anywhere in `value`, object keys included, holds a lone surrogate. */
export function hasLoneSurrogate(value: unknown): boolean {
  // A loop, not recursion: JSON.parse takes nesting deep enough to overflow the stack.
  const pending: unknown[] = [value]
  while (pending.length > 0) {
    const item = pending.pop()
    if (typeof item === 'string') {
      if (LONE_SURROGATE.test(item)) return true
    } else if (typeof item === 'object' && item !== null) {
      for (const [key, child] of Object.entries(item)) pending.push(key, child)
    }
  }
  return false
}

export function hasVisible(text: string): boolean {
  return !INVISIBLE.test(text)
}

export function countCodePoints(text: string): number {
  // The string iterator walks code points: a valid pair is one, a lone surrogate is one too.
  let count = 0
  for (const _ of text) count += 1
  return count
}

export function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1')
}

export function toPointer(key: string): string {
  return `/${escapePointer(key)}`
}
