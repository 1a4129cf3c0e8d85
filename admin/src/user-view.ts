/** A user as the API shows it (docs/api.md). */
export interface User {
  readonly id: string
  readonly email: string
  readonly name: string
  readonly status: string
  readonly metadata: Readonly<Record<string, string>>
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
    typeof user['metadata'] === 'object' &&
    user['metadata'] !== null &&
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
    ['metadata', JSON.stringify(user.metadata)],
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
  return { email: user.email, name: user.name, metadata: JSON.stringify(user.metadata) }
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
  if (text === '') return { ok: true, body: { ...body, metadata: {} } }
  let metadata: unknown
  try {
    metadata = JSON.parse(text)
  } catch {
    return {
      ok: false,
      field: 'metadata',
      message: 'Metadata must be a JSON object, such as {"team": "ops"}.',
    }
  }
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    return {
      ok: false,
      field: 'metadata',
      message: 'Metadata must be a JSON object, such as {"team": "ops"}.',
    }
  }
  return { ok: true, body: { ...body, metadata } }
}
