import type { FieldErrors } from './field-errors.js'
import {
  countCodePoints,
  hasLoneSurrogate,
  hasVisible,
  ILL_FORMED,
  type Problem,
} from './text-rules.js'
import type { FieldSpec } from './user-fields.js'

const patterns = new Map<string, RegExp>()
export function compiled(pattern: string): RegExp {
  let regex = patterns.get(pattern)
  if (regex === undefined) {
    // Stryker disable next-line StringLiteral: the field patterns use only \u escapes and ASCII classes, which mean the same without the u flag
    regex = new RegExp(pattern, 'u')
    patterns.set(pattern, regex)
  }
  return regex
}

export function checkString(
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
