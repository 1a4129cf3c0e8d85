/*
 * Holds one real answer of the service to what the served OpenAPI document declares for it: the
 * status among the operation's responses, the Content-Type among its media types, the body against
 * its schema, a problem's code against x-error-codes, and each declared header (present when
 * required, meeting its schema when sent). Every mismatch is one line naming the answer.
 */
import { isObject, type Json, resolve, schemaErrors } from './schema-check.js'

/** What a check needs of an answer, from fetch or from a raw socket. */
export interface Answer {
  readonly status: number
  /** Header names in lower case; a repeated header joined with ", " as fetch does. */
  readonly headers: ReadonlyMap<string, string>
  readonly text: string
}

/** An answer from fetch, its body read whole. */
export async function answerOf(res: Response): Promise<Answer> {
  return { status: res.status, headers: new Map(res.headers), text: await res.text() }
}

/** `GET /users/{id}` → the Operation Object (HEAD reads GET's). */
export function operationOf(doc: Json, operation: string): Json {
  const [method = '', path = ''] = operation.split(' ')
  const item = resolve(doc, isObject(doc['paths']) ? doc['paths'][path] : undefined)
  const op = item[method === 'HEAD' ? 'get' : method.toLowerCase()]
  if (!isObject(op)) throw new Error(`the document has no operation ${operation}`)
  return op
}

/** The six rate-limit fields of a counted answer. */
export const RATE_LIMIT_FIELDS = [
  'ratelimit',
  'ratelimit-policy',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-used',
  'x-ratelimit-reset',
]

/**
 * Headers whose presence says something to a client: sent on an answer whose document does not
 * declare them, a client typed by the document never sees them.
 */
const MEANINGFUL = [
  'etag',
  'location',
  'link',
  'retry-after',
  'www-authenticate',
  'accept-patch',
  'accept-encoding',
  'idempotent-replayed',
  ...RATE_LIMIT_FIELDS,
  'vary',
]

/** Every way `answer` to `operation` (`METHOD /path/{template}`) breaks the document. */
export function answerErrors(doc: Json, operation: string, answer: Answer): string[] {
  const label = `${operation} → ${answer.status}`
  const responses = resolve(doc, operationOf(doc, operation)['responses'])
  const declared = responses[String(answer.status)] ?? responses['default']
  if (declared === undefined) return [`${label}: the status is not declared`]
  const response = resolve(doc, declared)
  const errors = [
    ...headerErrors(doc, response, answer),
    ...bodyErrors(doc, response, answer, operation.startsWith('HEAD ')),
  ]
  return errors.map((error) => `${label}: ${error}`)
}

function headerErrors(doc: Json, response: Json, answer: Answer): string[] {
  const headers = isObject(response['headers']) ? response['headers'] : {}
  const names = new Set(Object.keys(headers).map((name) => name.toLowerCase()))
  const errors: string[] = []
  for (const [name, raw] of Object.entries(headers)) {
    const header = resolve(doc, raw)
    const value = answer.headers.get(name.toLowerCase())
    if (value === undefined) {
      if (header['required'] === true) errors.push(`lacks the header ${name}`)
      continue
    }
    for (const error of schemaErrors(doc, header['schema'], value)) errors.push(`${name}${error}`)
  }
  for (const name of MEANINGFUL)
    if (answer.headers.has(name) && !names.has(name) && !isCors(name, answer))
      errors.push(`sends ${name}, undeclared`)
  return errors
}

/** With CORS on, every answer varies by Origin, as the CORS headers it carries do. */
function isCors(name: string, answer: Answer): boolean {
  return name === 'vary' && answer.headers.get(name) === 'Origin'
}

function bodyErrors(doc: Json, response: Json, answer: Answer, head: boolean): string[] {
  const content = isObject(response['content']) ? response['content'] : undefined
  const type = answer.headers.get('content-type')
  if (content === undefined) {
    const errors = answer.text === '' ? [] : ['sends a body where none is declared']
    return type === undefined ? errors : [...errors, `sends Content-Type ${type}, none declared`]
  }
  const media = type?.split(';')[0]?.trim().toLowerCase() ?? ''
  const declared = content[media]
  if (!isObject(declared)) return [`Content-Type ${type} is not one of ${Object.keys(content)}`]
  if (head) return answer.text === '' ? [] : ['a HEAD answer has a body']
  if (!/[/+]json$/.test(media)) return schemaErrors(doc, declared['schema'], answer.text)
  let body: unknown
  try {
    body = JSON.parse(answer.text)
  } catch {
    return [`the body is not JSON: ${answer.text.slice(0, 80)}`]
  }
  const errors = schemaErrors(doc, declared['schema'], body).map((error) => `body${error}`)
  if (media === 'application/problem+json') errors.push(...problemErrors(doc, answer, body))
  return errors
}

/** A problem's status is the answer's, its code one of that status, its requestId the header's. */
function problemErrors(doc: Json, answer: Answer, body: unknown): string[] {
  if (!isObject(body)) return []
  const errors: string[] = []
  if (body['status'] !== answer.status) errors.push(`problem status ${String(body['status'])}`)
  const codes = isObject(doc['x-error-codes']) ? doc['x-error-codes'] : {}
  const entry = codes[String(body['code'])]
  if (!isObject(entry) || entry['status'] !== answer.status)
    errors.push(`problem code ${String(body['code'])} is not a code of ${answer.status}`)
  if (body['requestId'] !== answer.headers.get('x-request-id'))
    errors.push('problem requestId is not X-Request-Id')
  return errors
}
