import type { Metadata } from '../domain/user.js'
import { compiled } from './check-string.js'
import type { FieldErrors } from './field-errors.js'
import { addIfIllFormed, countCodePoints, escapePointer, hasLoneSurrogate } from './text-rules.js'
import { USER_FIELDS } from './user-fields.js'

/** Metadata as sent (`base` undefined) or merged into `base`, where a null value removes a key. */
export function checkMetadata(
  value: unknown,
  base: Metadata | undefined,
  errors: FieldErrors,
): Metadata | undefined {
  if (base !== undefined && value === null) return emptyMetadata()
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const message =
      base === undefined
        ? 'metadata must be an object of strings.'
        : 'metadata must be an object (or null to remove it all).'
    if (addIfIllFormed('/metadata', errors, value)) return undefined
    errors.add('/metadata', 'invalid_type', message)
    return undefined
  }
  const metadata = emptyMetadata()
  if (base !== undefined) Object.assign(metadata, base)
  let valid = true
  for (const [key, item] of Object.entries(value)) {
    if (base !== undefined && item === null && !hasLoneSurrogate(key)) {
      delete metadata[key]
      continue
    }
    valid = checkMetadataEntry(key, item, errors) && valid
    metadata[key] = item as string
  }
  return valid && checkKeyCount(metadata, errors) ? metadata : undefined
}

function checkMetadataEntry(key: string, value: unknown, errors: FieldErrors): boolean {
  const spec = USER_FIELDS.metadata
  const pointer = `/metadata/${escapePointer(key)}`
  if (addIfIllFormed(pointer, errors, key, value)) return false
  if (!compiled(spec.keyPattern).test(key)) {
    const message = 'A metadata key must be 1-64 characters of [A-Za-z0-9_.-].'
    errors.add(pointer, 'invalid_key', message)
    return false
  }
  if (typeof value !== 'string') {
    errors.add(pointer, 'invalid_type', 'A metadata value must be a string.')
    return false
  }
  if (countCodePoints(value) > spec.maxValueLength) {
    const message = `A metadata value must have at most ${spec.maxValueLength} characters.`
    errors.add(pointer, 'too_long', message)
    return false
  }
  return true
}

function checkKeyCount(metadata: Metadata, errors: FieldErrors): boolean {
  const max = USER_FIELDS.metadata.maxKeys
  if (Object.keys(metadata).length <= max) return true
  errors.add('/metadata', 'too_many_keys', `metadata may have at most ${max} keys.`)
  // Stryker disable next-line BooleanLiteral: the error is already added, so the 422 is thrown whatever is returned
  return false
}

/** Metadata keys come from clients: a null prototype makes `__proto__` an ordinary key. */
function emptyMetadata(): Record<string, string> {
  return Object.create(null) as Record<string, string>
}
