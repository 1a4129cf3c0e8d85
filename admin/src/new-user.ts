import {
  clearAlert,
  clearFieldErrors,
  fillForm,
  readForm,
  showFieldError,
  showFormProblem,
} from './alerts.js'
import { api } from './api.js'
import { closeDialog, openDialog } from './dialogs.js'
import { byId } from './dom.js'
import { formBody, type User } from './user-view.js'

/** The "New user" dialog: Email, Name, Metadata, then Create or Cancel. */
export function setUpNewUser(created: (user: User) => void): void {
  const dialog = byId('new-user-dialog', HTMLDialogElement)
  const opener = byId('new-user', HTMLButtonElement)
  const form = byId('new-form', HTMLFormElement)
  const alert = byId('new-alert', HTMLDivElement)
  opener.addEventListener('click', () => {
    fillForm('new', { email: '', name: '', metadata: '' })
    clearFieldErrors('new')
    clearAlert(alert)
    openDialog(dialog, opener)
  })
  byId('new-cancel', HTMLButtonElement).addEventListener('click', () => {
    closeDialog(dialog)
  })
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    const body = formBody(readForm('new'))
    clearFieldErrors('new')
    if (!body.ok) {
      showFieldError('new', body.field, [body.message])
      document.getElementById(`new-${body.field}`)?.focus()
      return
    }
    void api.create(body.body).then((answer) => {
      if (!answer.ok) {
        showFormProblem('new', alert, answer.problem)
        return
      }
      closeDialog(dialog)
      created(answer.value)
    })
  })
}
