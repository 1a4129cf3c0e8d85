import { HttpError, type FieldError } from '../errors.js'
import { EMPTY_METADATA, type Metadata, type User } from './user.js'
import { USER_FIELDS, isFieldName, type FieldSpec } from './user-fields.js'

/** The writable fields, checked and normalised (trimmed): what a create, replace or patch sets. */
export interface UserInput {
  readonly email: string
  readonly name: string
  readonly metadata: Metadata
}

type Body = Readonly<Record<string, unknown>>

/** POST /users: every required field, no output-only field, nothing unknown. */
export function validateCreate(body: unknown): UserInput {
  return validateWhole(body, undefined)
}

/** PUT: like a create, except that output-only fields may echo their stored values. */
export function validateReplace(body: unknown, current: User): UserInput {
  return validateWhole(body, current)
}

/** PATCH (RFC 7396): named fields change, `null` removes a metadata key or all of metadata. */
export function validatePatch(body: unknown, current: User): UserInput {
  const errors: FieldError[] = []
  const fields = requireObject(body, errors)
  const next = { email: current.email, name: current.name, metadata: current.metadata }
  for (const [key, value] of Object.entries(fields)) {
    if (!checkKnown(key, value, current, errors)) continue
    if (key === 'metadata') {
      const metadata = mergeMetadata(current.metadata, value, errors)
      if (metadata !== undefined) next.metadata = metadata
    } else if (key === 'email' || key === 'name') {
      const text = checkString(key, USER_FIELDS[key], value, errors)
      if (text !== undefined) next[key] = text
    }
  }
  throwIfAny(errors)
  return next
}

/** A custom method's body: nothing, or an empty object. */
export function validateEmptyBody(body: unknown): void {
  if (body === undefined) return
  const errors: FieldError[] = []
  const fields = requireObject(body, errors)
  for (const key of Object.keys(fields)) {
    errors.push({ pointer: toPointer(key), code: 'unknown_field', message: `${key} is not taken here: send an empty body or {}.` })
  }
  throwIfAny(errors)
}

function validateWhole(body: unknown, current: User | undefined): UserInput {
  const errors: FieldError[] = []
  const fields = requireObject(body, errors)
  for (const [key, value] of Object.entries(fields)) checkKnown(key, value, current, errors)
  const email = checkString('email', USER_FIELDS.email, fields['email'], errors)
  const name = checkString('name', USER_FIELDS.name, fields['name'], errors)
  const metadata = fields['metadata'] === undefined
    ? EMPTY_METADATA
    : checkMetadata(fields['metadata'], errors)
  throwIfAny(errors)
  if (email === undefined || name === undefined || metadata === undefined) {
    throw new Error('validateWhole: a field was refused without an error')
  }
  return { email, name, metadata }
}

function requireObject(body: unknown, errors: FieldError[]): Body {
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) return body as Body
  errors.push({ pointer: '', code: 'invalid_type', message: 'The body must be a JSON object.' })
  throwIfAny(errors)
  return {}
}

/**
 * True for a writable field (the caller checks its value). Unknown fields are refused; an
 * output-only field passes only when it equals the stored value.
 */
function checkKnown(key: string, value: unknown, current: User | undefined, errors: FieldError[]): boolean {
  if (!isFieldName(key)) {
    errors.push({ pointer: toPointer(key), code: 'unknown_field', message: `${key} is not a field of a user.` })
    return false
  }
  const spec: FieldSpec = USER_FIELDS[key]
  if (spec.access === 'writable') return true
  if (current !== undefined && current[key] === value) return false
  const hint = spec.changeHint === undefined ? '' : `; ${spec.changeHint}`
  const message = current === undefined
    ? `${key} is read-only: it is set by the server${hint}.`
    : `${key} is read-only: send its stored value or leave it out${hint}.`
  errors.push({ pointer: `/${key}`, code: 'read_only', message })
  return false
}

const patterns = new Map<string, RegExp>()
function compiled(pattern: string): RegExp {
  let regex = patterns.get(pattern)
  if (regex === undefined) {
    regex = new RegExp(pattern, 'u')
    patterns.set(pattern, regex)
  }
  return regex
}

function checkString(key: string, spec: FieldSpec, value: unknown, errors: FieldError[]): string | undefined {
  const pointer = `/${key}`
  if (value === undefined || value === null) {
    errors.push({ pointer, code: 'required', message: `${key} is required.` })
    return undefined
  }
  if (typeof value !== 'string') {
    errors.push({ pointer, code: 'invalid_type', message: `${key} must be a string.` })
    return undefined
  }
  const text = spec.trim === true ? value.trim() : value
  const length = countCodePoints(text)
  if (spec.minLength !== undefined && length < spec.minLength) {
    const code = length === 0 ? 'required' : 'too_short'
    errors.push({ pointer, code, message: `${key} must have at least ${spec.minLength} characters.` })
    return undefined
  }
  if (spec.maxLength !== undefined && length > spec.maxLength) {
    errors.push({ pointer, code: 'too_long', message: `${key} must have at most ${spec.maxLength} characters.` })
    return undefined
  }
  if (spec.pattern !== undefined && !compiled(spec.pattern).test(text)) {
    errors.push({ pointer, code: 'invalid_characters', message: `${key} must not contain control characters.` })
    return undefined
  }
  if (spec.format === 'email') {
    const problem = checkEmail(text, spec)
    if (problem !== undefined) {
      errors.push({ pointer, ...problem })
      return undefined
    }
  }
  return text
}

const EMAIL_FORBIDDEN = /[\s\u0000-\u001F\u007F-\u009F]/u
const EMAIL_DOMAIN = /^[^.@]+(\.[^.@]+)+$/

/** A practical check, not RFC 5322: one @, a non-empty local part, a dotted domain, no spaces. */
function checkEmail(text: string, spec: FieldSpec): Omit<FieldError, 'pointer'> | undefined {
  const at = text.indexOf('@')
  const local = text.slice(0, at)
  const domain = text.slice(at + 1)
  if (at < 1 || domain.includes('@') || EMAIL_FORBIDDEN.test(text) || !EMAIL_DOMAIN.test(domain)) {
    return { code: 'invalid_format', message: 'email must look like local@domain.tld, without spaces.' }
  }
  if (spec.maxLocalLength !== undefined && countCodePoints(local) > spec.maxLocalLength) {
    return { code: 'too_long', message: `The local part of email must have at most ${spec.maxLocalLength} characters.` }
  }
  return undefined
}

function checkMetadata(value: unknown, errors: FieldError[]): Metadata | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    errors.push({ pointer: '/metadata', code: 'invalid_type', message: 'metadata must be an object of strings.' })
    return undefined
  }
  const metadata = emptyMetadata()
  let valid = true
  for (const [key, item] of Object.entries(value)) {
    valid = checkMetadataEntry(key, item, errors) && valid
    metadata[key] = item as string
  }
  return valid && checkKeyCount(metadata, errors) ? metadata : undefined
}

function mergeMetadata(current: Metadata, patch: unknown, errors: FieldError[]): Metadata | undefined {
  if (patch === null) return emptyMetadata()
  if (typeof patch !== 'object' || Array.isArray(patch)) {
    errors.push({ pointer: '/metadata', code: 'invalid_type', message: 'metadata must be an object (or null to remove it all).' })
    return undefined
  }
  const merged = emptyMetadata()
  Object.assign(merged, current)
  let valid = true
  for (const [key, item] of Object.entries(patch)) {
    if (item === null) {
      delete merged[key]
      continue
    }
    valid = checkMetadataEntry(key, item, errors) && valid
    merged[key] = item as string
  }
  return valid && checkKeyCount(merged, errors) ? merged : undefined
}

function checkMetadataEntry(key: string, value: unknown, errors: FieldError[]): boolean {
  const spec = USER_FIELDS.metadata
  const pointer = `/metadata/${escapePointer(key)}`
  if (!compiled(spec.keyPattern).test(key)) {
    errors.push({ pointer, code: 'invalid_key', message: 'A metadata key must be 1-64 characters of [A-Za-z0-9_.-].' })
    return false
  }
  if (typeof value !== 'string') {
    errors.push({ pointer, code: 'invalid_type', message: 'A metadata value must be a string.' })
    return false
  }
  if (countCodePoints(value) > spec.maxValueLength) {
    errors.push({ pointer, code: 'too_long', message: `A metadata value must have at most ${spec.maxValueLength} characters.` })
    return false
  }
  return true
}

function checkKeyCount(metadata: Metadata, errors: FieldError[]): boolean {
  const max = USER_FIELDS.metadata.maxKeys
  if (Object.keys(metadata).length <= max) return true
  errors.push({ pointer: '/metadata', code: 'too_many_keys', message: `metadata may have at most ${max} keys.` })
  return false
}

/** Metadata keys come from clients: a null prototype makes `__proto__` an ordinary key. */
function emptyMetadata(): Record<string, string> {
  return Object.create(null) as Record<string, string>
}

function countCodePoints(text: string): number {
  let count = 0
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i)
    // A high surrogate followed by a low one is one code point.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) i += 1
    }
    count += 1
  }
  return count
}

function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1')
}

function toPointer(key: string): string {
  return `/${escapePointer(key)}`
}

function throwIfAny(errors: readonly FieldError[]): void {
  if (errors.length === 0) return
  const fields = [...new Set(errors.map((error) => error.pointer || 'the body'))].join(', ')
  throw new HttpError('validation_failed', `The request breaks the rules of: ${fields}.`, { errors })
}
