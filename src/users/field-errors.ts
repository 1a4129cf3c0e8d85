import { type FieldError, ServiceError } from '../domain/errors.js'

/** A 422 lists at most this many field errors (docs/api.md): the first ones, in body order. */
export const MAX_FIELD_ERRORS = 20

/**
 * Collects field errors in body order. Adding one past the limit ends validation at once: no more
 * would be sent, and a hostile body should not cost more work than its first errors.
 */
export class FieldErrors {
  readonly #errors: FieldError[] = []

  add(pointer: string, code: string, message: string): void {
    if (this.#errors.length === MAX_FIELD_ERRORS) throw toValidationError(this.#errors, true)
    this.#errors.push({ pointer, code, message })
  }

  throwIfAny(): void {
    if (this.#errors.length > 0) throw toValidationError(this.#errors, false)
  }
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
