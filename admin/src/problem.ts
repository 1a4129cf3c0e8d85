import { EDITABLE, type EditableField } from './user-view.js'

/** What the page shows of an error answer (application/problem+json, docs/api.md). */
export interface ShownProblem {
  readonly status: number
  readonly code: string
  readonly title: string
  readonly detail: string
  /** The messages of the field errors whose pointer names a field of the form. */
  readonly fields: ReadonlyMap<EditableField, readonly string[]>
  /** Every other field error, as text for the alert. */
  readonly others: readonly string[]
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : ''
}

/** The form field a JSON pointer names (`/metadata/team` is Metadata), if any. */
export function fieldOf(pointer: string): EditableField | undefined {
  const first = pointer.split('/')[1] ?? ''
  return EDITABLE.find((field) => field === first)
}

/**
 * Reads an error answer: its title and detail, and each `errors[]` entry either at the field its
 * `pointer` names or among the others. A body that is not a problem still gives the status.
 */
export function readProblem(status: number, body: unknown): ShownProblem {
  const problem = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {}
  const fields = new Map<EditableField, string[]>()
  const others: string[] = []
  const errors = Array.isArray(problem['errors']) ? (problem['errors'] as unknown[]) : []
  for (const entry of errors) {
    if (typeof entry !== 'object' || entry === null) continue
    const { pointer, message, code } = entry as Record<string, unknown>
    const said = text(message) || text(code)
    // An entry with nothing to say adds nothing to the form.
    if (said === '') continue
    const field = fieldOf(text(pointer))
    if (field === undefined) {
      others.push(text(pointer) === '' ? said : `${text(pointer)}: ${said}`)
      continue
    }
    fields.set(field, [...(fields.get(field) ?? []), said])
  }
  return {
    status,
    code: text(problem['code']),
    title: text(problem['title']) || `Error ${status}`,
    detail: text(problem['detail']),
    fields,
    others,
  }
}
