import { make } from './dom.js'
import type { ShownProblem } from './problem.js'
import { EDITABLE, type EditableField } from './user-view.js'

/** Empties a `role="alert"` element. */
export function clearAlert(alert: HTMLElement): void {
  alert.replaceChildren()
}

/** Puts a message in a `role="alert"` element (which announces it), with controls after it. */
export function say(alert: HTMLElement, text: string, ...controls: HTMLElement[]): void {
  alert.replaceChildren(make('p', text), ...controls)
}

/** A problem's title and detail, and the field errors no field of the form shows. */
export function showProblem(alert: HTMLElement, problem: ShownProblem): void {
  const parts: HTMLElement[] = [make('strong', problem.title)]
  if (problem.detail !== '') parts.push(make('p', problem.detail))
  if (problem.others.length > 0) {
    const list = make('ul')
    for (const other of problem.others) list.append(make('li', other))
    parts.push(list)
  }
  alert.replaceChildren(...parts)
}

// A form's fields are `<prefix>-email` and so on, each with a `<prefix>-email-error` paragraph.
function control(
  prefix: string,
  field: EditableField,
): HTMLInputElement | HTMLTextAreaElement | null {
  const found = document.getElementById(`${prefix}-${field}`)
  return found instanceof HTMLInputElement || found instanceof HTMLTextAreaElement ? found : null
}

/** Takes every field error away: no `aria-invalid`, no description. */
export function clearFieldErrors(prefix: string): void {
  for (const field of EDITABLE) showFieldError(prefix, field, [])
}

/**
 * Shows a field's messages under it: the control is marked `aria-invalid` and described by them,
 * so that a screen reader reads them with the field.
 */
export function showFieldError(
  prefix: string,
  field: EditableField,
  messages: readonly string[],
): void {
  const input = control(prefix, field)
  const note = document.getElementById(`${prefix}-${field}-error`)
  if (input === null || note === null) return
  note.textContent = messages.join(' ')
  if (messages.length === 0) {
    input.removeAttribute('aria-invalid')
    input.removeAttribute('aria-describedby')
    note.hidden = true
    return
  }
  note.hidden = false
  input.setAttribute('aria-invalid', 'true')
  input.setAttribute('aria-describedby', note.id)
}

/**
 * A refused form: its field errors at their fields, the rest in its alert; the focus moves to the
 * first field in error, or stays where it was.
 */
export function showFormProblem(prefix: string, alert: HTMLElement, problem: ShownProblem): void {
  clearFieldErrors(prefix)
  for (const [field, messages] of problem.fields) showFieldError(prefix, field, messages)
  if (problem.fields.size === 0 || problem.others.length > 0) showProblem(alert, problem)
  else clearAlert(alert)
  const first = EDITABLE.find((field) => problem.fields.has(field))
  if (first !== undefined) control(prefix, first)?.focus()
}

/** The text of a form's fields. */
export function readForm(prefix: string): Record<EditableField, string> {
  const value = (field: EditableField): string => control(prefix, field)?.value ?? ''
  return { email: value('email'), name: value('name'), metadata: value('metadata') }
}

/** Fills a form's fields. */
export function fillForm(prefix: string, values: Readonly<Record<EditableField, string>>): void {
  for (const field of EDITABLE) {
    const input = control(prefix, field)
    if (input !== null) input.value = values[field]
  }
}
