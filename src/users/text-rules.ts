import type { FieldError } from '../domain/errors.js'
import type { FieldErrors } from './field-errors.js'

export type Problem = Omit<FieldError, 'pointer'>

export const ILL_FORMED: Problem = {
  code: 'invalid_characters',
  message: 'Strings must be well-formed Unicode: this one holds a lone surrogate.',
}

// In `u` mode a lone surrogate matches and a valid pair (one code point) does not.
const LONE_SURROGATE = /\p{Surrogate}/u
const INVISIBLE = /^[\p{White_Space}\p{Default_Ignorable_Code_Point}]*$/u

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
