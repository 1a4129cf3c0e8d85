import { EMPTY_METADATA, type Metadata, type User } from '../domain/user.js'
import { checkMetadata } from './check-metadata.js'
import { checkString } from './check-string.js'
import { FieldErrors } from './field-errors.js'
import { addIfIllFormed, toPointer } from './text-rules.js'
import { type FieldSpec, isFieldName, USER_FIELDS } from './user-fields.js'

/** The writable fields, checked and normalised (trimmed): what a create, replace or patch sets. */
export interface UserInput {
  readonly email: string
  readonly name: string
  readonly metadata: Metadata
}

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
