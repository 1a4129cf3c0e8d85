import { type FieldError, ServiceError } from '../domain/errors.js'
import { EMPTY_METADATA, type Metadata, type User } from '../domain/user.js'
import { type FieldSpec, isFieldName, USER_FIELDS } from './user-fields.js'

/** The writable fields, checked and normalised (trimmed): what a create, replace or patch sets. */
export interface UserInput {
  readonly email: string
  readonly name: string
  readonly metadata: Metadata
}

/** A 422 lists at most this many field errors (§9): the first ones, in body order. */
export const MAX_FIELD_ERRORS = 20

type Body = Readonly<Record<string, unknown>>

/** POST /users: every required field, no output-only field, nothing unknown. */
export function validateCreate(body: unknown): UserInput {
  return validateBody(body, undefined, undefined)
}

/** PUT: like a create, except that output-only fields may echo their stored values. */
export function validateReplace(body: unknown, current: User): UserInput {
  return validateBody(body, current, undefined)
}

/** PATCH (RFC 7396): named fields change, `null` removes a metadata key or all of metadata. */
export function validatePatch(body: unknown, current: User): UserInput {
  return validateBody(body, current, current)
}

/** A custom method's body: nothing, or an empty object. */
export function validateEmptyBody(body: unknown): void {
  if (body === undefined) return
  const errors = new FieldErrors()
  for (const [key, value] of Object.entries(requireObject(body, errors))) {
    const pointer = toPointer(key)
    if (addIfIllFormed(pointer, errors, key, value)) continue
    errors.add(pointer, 'unknown_field', 'No field is taken here: send an empty body or {}.')
  }
  errors.throwIfAny()
}

/**
 * Collects field errors in body order. Adding one past the limit ends validation at once: no more
 * would be sent, and a hostile body should not cost more work than its first errors.
 */
class FieldErrors {
  readonly #errors: FieldError[] = []

  add(pointer: string, code: string, message: string): void {
    if (this.#errors.length === MAX_FIELD_ERRORS) throw toValidationError(this.#errors, true)
    this.#errors.push({ pointer, code, message })
  }

  throwIfAny(): void {
    if (this.#errors.length > 0) throw toValidationError(this.#errors, false)
  }
}

interface Draft {
  email: string | undefined
  name: string | undefined
  metadata: Metadata | undefined
}

/**
 * Checks every field in body order. `current` is the stored user that output-only fields may echo;
 * `base` is the user a merge patch applies to (fields it leaves out keep their values).
 */
function validateBody(body: unknown, current: User | undefined, base: User | undefined): UserInput {
  const errors = new FieldErrors()
  const fields = requireObject(body, errors)
  const draft: Draft =
    base === undefined
      ? { email: undefined, name: undefined, metadata: EMPTY_METADATA }
      : { email: base.email, name: base.name, metadata: base.metadata }
  for (const [key, value] of Object.entries(fields)) {
    if (!checkKnown(key, value, current, errors)) continue
    if (key === 'metadata') {
      draft.metadata = checkMetadata(value, base?.metadata, errors)
    } else if (key === 'email' || key === 'name') {
      draft[key] = checkString(key, USER_FIELDS[key], value, errors)
    }
  }
  if (base === undefined) {
    for (const key of ['email', 'name'] as const) {
      if (!Object.hasOwn(fields, key)) errors.add(`/${key}`, 'required', `${key} is required.`)
    }
  }
  errors.throwIfAny()
  const { email, name, metadata } = draft
  // Stryker disable next-line ConditionalExpression,LogicalOperator,BlockStatement: unreachable, every refused field added an error and throwIfAny threw
  if (email === undefined || name === undefined || metadata === undefined) {
    // Stryker disable next-line StringLiteral: unreachable, as above
    throw new Error('validateBody: a field was refused without an error')
  }
  return { email, name, metadata }
}

function requireObject(body: unknown, errors: FieldErrors): Body {
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) return body as Body
  errors.add('', 'invalid_type', 'The body must be a JSON object.')
  errors.throwIfAny()
  return {}
}

/**
 * True for a writable field (the caller checks its value). Unknown fields are refused; an
 * output-only field passes only when it equals the stored value.
 */
function checkKnown(
  key: string,
  value: unknown,
  current: User | undefined,
  errors: FieldErrors,
): boolean {
  const pointer = toPointer(key)
  if (!isFieldName(key)) {
    // The message leaves the key out: it can be kilobytes long, and the pointer already holds it.
    if (!addIfIllFormed(pointer, errors, key, value)) {
      errors.add(pointer, 'unknown_field', 'This is not a field of a user.')
    }
    // Stryker disable next-line BooleanLiteral: validateBody acts only on email, name and metadata, so true changes nothing for other keys
    return false
  }
  const spec: FieldSpec = USER_FIELDS[key]
  if (spec.access === 'writable') return true
  // Stryker disable next-line BooleanLiteral: validateBody acts only on email, name and metadata, so true changes nothing for other keys
  if (addIfIllFormed(pointer, errors, value)) return false
  // Stryker disable next-line BooleanLiteral: as above
  if (current !== undefined && current[key] === value) return false
  const hint = spec.changeHint === undefined ? '' : `; ${spec.changeHint}`
  const message =
    current === undefined
      ? `${key} is read-only: it is set by the server${hint}.`
      : `${key} is read-only: send its stored value or leave it out${hint}.`
  errors.add(pointer, 'read_only', message)
  // Stryker disable next-line BooleanLiteral: as above
  return false
}

const patterns = new Map<string, RegExp>()
function compiled(pattern: string): RegExp {
  let regex = patterns.get(pattern)
  if (regex === undefined) {
    // Stryker disable next-line StringLiteral: the field patterns use only \u escapes and ASCII classes, which mean the same without the u flag
    regex = new RegExp(pattern, 'u')
    patterns.set(pattern, regex)
  }
  return regex
}

function checkString(
  key: string,
  spec: FieldSpec,
  value: unknown,
  errors: FieldErrors,
): string | undefined {
  const pointer = `/${key}`
  if (value === undefined || value === null) {
    errors.add(pointer, 'required', `${key} is required.`)
    return undefined
  }
  if (typeof value !== 'string') {
    errors.add(pointer, 'invalid_type', `${key} must be a string.`)
    return undefined
  }
  const text = spec.trim === true ? value.trim() : value
  const problem = hasLoneSurrogate(value) ? ILL_FORMED : findTextProblem(key, spec, text)
  if (problem === undefined) return text
  errors.add(pointer, problem.code, problem.message)
  return undefined
}

type Problem = Omit<FieldError, 'pointer'>

function characters(count: number): string {
  return count === 1 ? '1 character' : `${count} characters`
}

/** The first rule a (trimmed) string breaks, in the order a client would fix them. */
function findTextProblem(key: string, spec: FieldSpec, text: string): Problem | undefined {
  const length = countCodePoints(text)
  if (spec.minLength !== undefined && length < spec.minLength) {
    const code = length === 0 ? 'required' : 'too_short'
    return { code, message: `${key} must have at least ${characters(spec.minLength)}.` }
  }
  if (spec.maxLength !== undefined && length > spec.maxLength) {
    return { code: 'too_long', message: `${key} must have at most ${characters(spec.maxLength)}.` }
  }
  if (spec.pattern !== undefined && !compiled(spec.pattern).test(text)) {
    const message = `${key} must not contain control characters (C0, DEL or C1).`
    return { code: 'invalid_characters', message }
  }
  if (spec.requireVisible === true && !hasVisible(text)) {
    const message = `${key} has nothing visible: only white space or zero-width characters.`
    return { code: 'invalid_characters', message }
  }
  return spec.format === 'email' ? checkEmail(text, spec) : undefined
}

const EMAIL_FORBIDDEN = /[\s\u0000-\u001F\u007F-\u009F]/u
const EMAIL_DOMAIN = /^[^.@]+(\.[^.@]+)+$/

/** A practical check, not RFC 5322: one @, a non-empty local part, a dotted domain, no spaces. */
function checkEmail(text: string, spec: FieldSpec): Problem | undefined {
  const at = text.indexOf('@')
  const local = text.slice(0, at)
  const domain = text.slice(at + 1)
  if (at < 1 || domain.includes('@') || EMAIL_FORBIDDEN.test(text) || !EMAIL_DOMAIN.test(domain)) {
    const message = 'email must look like local@domain.tld, without spaces.'
    return { code: 'invalid_format', message }
  }
  if (!hasVisible(local) || !domain.split('.').every(hasVisible)) {
    const message = 'email needs a visible character before the @ and in each label of its domain.'
    return { code: 'invalid_format', message }
  }
  if (spec.maxLocalLength !== undefined && countCodePoints(local) > spec.maxLocalLength) {
    const message = `The local part of email must have at most ${spec.maxLocalLength} characters.`
    return { code: 'too_long', message }
  }
  return undefined
}

/** Metadata as sent (`base` undefined) or merged into `base`, where a null value removes a key. */
function checkMetadata(
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

const ILL_FORMED: Problem = {
  code: 'invalid_characters',
  message: 'Strings must be well-formed Unicode: this one holds a lone surrogate.',
}

// In `u` mode a lone surrogate matches and a valid pair (one code point) does not.
const LONE_SURROGATE = /\p{Surrogate}/u
const INVISIBLE = /^[\p{White_Space}\p{Default_Ignorable_Code_Point}]*$/u

/** §9: a lone surrogate anywhere under a field refuses it, whatever else is wrong with it. */
function addIfIllFormed(pointer: string, errors: FieldErrors, ...values: unknown[]): boolean {
  if (!values.some(hasLoneSurrogate)) return false
  errors.add(pointer, ILL_FORMED.code, ILL_FORMED.message)
  return true
}

/** True when a string anywhere in `value`, object keys included, holds a lone surrogate. */
function hasLoneSurrogate(value: unknown): boolean {
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

function hasVisible(text: string): boolean {
  return !INVISIBLE.test(text)
}

function countCodePoints(text: string): number {
  let count = 0
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i)
    // A high surrogate followed by a low one is one code point.
    // Stryker disable next-line LogicalOperator: in well-formed text only a high surrogate is followed by a low one
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1)
      // Stryker disable next-line LogicalOperator: in well-formed text a high surrogate is always followed by a low one
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

/** The detail names a few fields, each cut short: it stays small whatever the body held. */
const DETAIL_POINTERS = 3
const DETAIL_POINTER_LENGTH = 40

function toValidationError(errors: readonly FieldError[], truncated: boolean): ServiceError {
  const pointers = [...new Set(errors.map((error) => error.pointer))]
  const named = pointers.slice(0, DETAIL_POINTERS).map(toDetailName).join(', ')
  const rest = pointers.length - DETAIL_POINTERS
  const more = rest <= 0 ? '' : ` and ${rest} more field${rest === 1 ? '' : 's'}`
  const limit = truncated ? ` Only the first ${MAX_FIELD_ERRORS} errors are listed.` : ''
  const detail = `The request breaks the rules of: ${named}${more}.${limit}`
  return new ServiceError('validation_failed', detail, { errors: [...errors] })
}

function toDetailName(pointer: string): string {
  if (pointer === '') return 'the body'
  if (pointer.length <= DETAIL_POINTER_LENGTH) return pointer
  // Two UTF-16 units per code point at most: enough to tell whether the pointer needs a cut.
  // Stryker disable next-line MethodExpression: the slice only bounds the work; the whole pointer gives the same answer
  const head = pointer.slice(0, DETAIL_POINTER_LENGTH * 2)
  const codePoints = [...head]
  if (head === pointer && codePoints.length <= DETAIL_POINTER_LENGTH) return pointer
  return `${codePoints.slice(0, DETAIL_POINTER_LENGTH - 1).join('')}…`
}
