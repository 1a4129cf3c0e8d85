import { HttpError } from './problem.js'

// Placeholder until the parser lands: a quoted key only.
export function readIdempotencyKey(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined
  const text = Array.isArray(value) ? value.join(', ') : value
  const match = /^ *"([\x20-\x21\x23-\x5b\x5d-\x7e]{1,255})" *$/.exec(text)
  if (match?.[1] === undefined) throw new HttpError('invalid_idempotency_key', 'bad key')
  return match[1]
}
