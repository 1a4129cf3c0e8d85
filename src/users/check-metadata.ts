import { EMPTY_METADATA, type Metadata, metadataKeys, toMetadata } from '../domain/metadata.js'
import { compiled } from './check-string.js'
import type { FieldErrors } from './field-errors.js'
import { addIfIllFormed, countCodePoints, escapePointer, hasLoneSurrogate } from './text-rules.js'
import { USER_FIELDS } from './user-fields.js'

/**
 * Metadata as sent (`base` undefined) or merged into `base`, where a null value removes a key:
 * kept keys keep their place, new ones follow in the order sent.
 */
export function checkMetadata(
  value: unknown,
  base: Metadata | undefined,
  errors: FieldErrors,
): Metadata | undefined {
  if (base !== undefined && value === null) return EMPTY_METADATA
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const message =
      base === undefined
        ? 'metadata must be an object of strings.'
        : 'metadata must be an object (or null to remove it all).'
    if (addIfIllFormed('/metadata', errors, value)) return undefined
    errors.add('/metadata', 'invalid_type', message)
    return undefined
  }
  // A Map keeps every key where it was put; an object would move index-like keys ahead.
  const metadata = new Map<string, string>()
  if (base !== undefined) for (const key of metadataKeys(base)) metadata.set(key, base[key] ?? '')
  const sent = value as Readonly<Record<string, unknown>>
  let valid = true
  for (const key of metadataKeys(sent)) {
    const item = sent[key]
    if (base !== undefined && item === null && !hasLoneSurrogate(key)) {
      metadata.delete(key)
      continue
    }
    valid = checkMetadataEntry(key, item, errors) && valid
    metadata.set(key, item as string)
  }
  return valid && checkKeyCount(metadata.size, errors) ? toMetadata(metadata) : undefined
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

function checkKeyCount(count: number, errors: FieldErrors): boolean {
  const max = USER_FIELDS.metadata.maxKeys
  if (count <= max) return true
  errors.add('/metadata', 'too_many_keys', `metadata may have at most ${max} keys.`)
  // Stryker disable next-line BooleanLiteral: the error is already added, so the 422 is thrown whatever is returned
  return false
}
