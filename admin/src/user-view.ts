/** A user as the API shows it (docs/api.md), its metadata in the order the service keeps. */
export interface User {
  readonly id: string
  readonly email: string
  readonly name: string
  readonly status: string
  readonly metadata: ReadonlyMap<string, string>
  readonly version: number
  readonly createdAt: string
  readonly updatedAt: string
  /** Set by the user's first revocation of tokens; absent before. */
  readonly tokensValidAfter?: string
}

/** The fields a form edits, in the order the forms show them. */
export const EDITABLE = ['email', 'name', 'metadata'] as const
export type EditableField = (typeof EDITABLE)[number]

/** What a form holds: the text of each field, as typed. */
export type FormValues = Readonly<Record<EditableField, string>>

export function isUser(value: unknown): value is User {
  if (typeof value !== 'object' || value === null) return false
  const user = value as Record<string, unknown>
  return (
    typeof user['id'] === 'string' &&
    typeof user['email'] === 'string' &&
    typeof user['name'] === 'string' &&
    typeof user['status'] === 'string' &&
    typeof user['version'] === 'number' &&
    user['metadata'] instanceof Map &&
    (user['tokensValidAfter'] === undefined || typeof user['tokensValidAfter'] === 'string')
  )
}

/**
 * Every field of a user, labelled, as the detail shows them (metadata as JSON; tokensValidAfter
 * once the user has one).
 */
export function userFields(user: User): [label: string, text: string][] {
  return [
    ['id', user.id],
    ['email', user.email],
    ['name', user.name],
    ['status', user.status],
    ['metadata', writeJson(user.metadata)],
    ['version', String(user.version)],
    ['createdAt', user.createdAt],
    ['updatedAt', user.updatedAt],
    ...(user.tokensValidAfter === undefined
      ? []
      : [['tokensValidAfter', user.tokensValidAfter] as [string, string]]),
  ]
}

/** The form's text for a user: what the edit form starts from. */
export function formValues(user: User): FormValues {
  return { email: user.email, name: user.name, metadata: writeJson(user.metadata) }
}

export type FormBody =
  | { readonly ok: true; readonly body: Record<string, unknown> }
  | { readonly ok: false; readonly field: EditableField; readonly message: string }

/**
 * The request body for a form: what was typed, sent as is, so that the server's rules and words
 * are the only ones. Only Metadata is read here, as it must be JSON to be sent at all; empty means
 * no metadata.
 */
export function formBody(values: FormValues): FormBody {
  const body: Record<string, unknown> = { email: values.email, name: values.name }
  const text = values.metadata.trim()
  if (text === '') return { ok: true, body: { ...body, metadata: new Map() } }
  let metadata: unknown
  try {
    // In the order typed: a Map, which api.ts writes back as an object in that order.
    metadata = readJson(text, 'metadata')
  } catch {
    return {
      ok: false,
      field: 'metadata',
      message: 'Metadata must be a JSON object, such as {"team": "ops"}.',
    }
  }
  if (!(metadata instanceof Map)) {
    return {
      ok: false,
      field: 'metadata',
      message: 'Metadata must be a JSON object, such as {"team": "ops"}.',
    }
  }
  return { ok: true, body: { ...body, metadata } }
}

// JSON read and written with metadata in the order of the text. A user's metadata keeps the order
// its keys were sent in, and a reorder is a change (docs/api.md); a JS object puts keys that are
// numbers ("9", "1") first, so the page holds metadata as a Map, which keeps every order.

// Every string of JSON text, with the colon that makes it a member name. Between two strings
// valid JSON holds no quote, so each match starts at a string's opening quote.
const STRING = /"(?:[^"\\]|\\.)*"(\s*:)?/g

function unmark(value: unknown, name: string): unknown {
  if (Array.isArray(value)) return value.map((item) => unmark(item, ''))
  if (typeof value !== 'object' || value === null) return value
  const entries = Object.entries(value).map(([marked, item]): [string, unknown] => {
    const key = marked.slice(1)
    return [key, unmark(item, key)]
  })
  return name === 'metadata' ? new Map(entries) : Object.fromEntries(entries)
}

/**
 * JSON.parse, but each object named `metadata` becomes a Map in the order of the text; `name`
 * is the member name the whole value stands at (`metadata` for a typed metadata object).
 */
export function readJson(text: string, name = ''): unknown {
  // Each member name is read with a `#` in front, which no number has: JSON.parse keeps the order.
  const marked = text.replace(STRING, (token, colon: string | undefined) =>
    colon === undefined ? token : `"#${token.slice(1)}`,
  )
  return unmark(JSON.parse(marked), name)
}

/** JSON text of a value, each Map an object in the Map's order. */
export function writeJson(value: unknown): string {
  const members = (entries: [string, unknown][]): string =>
    `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${writeJson(item)}`).join(',')}}`
  if (value instanceof Map) return members([...(value as Map<string, unknown>)])
  if (Array.isArray(value)) return `[${value.map(writeJson).join(',')}]`
  if (typeof value === 'object' && value !== null) return members(Object.entries(value))
  return JSON.stringify(value)
}
