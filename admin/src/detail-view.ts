import {
  clearAlert,
  clearFieldErrors,
  fillForm,
  readForm,
  say,
  showFieldError,
  showFormProblem,
  showProblem,
} from './alerts.js'
import { type Answer, api } from './api.js'
import { confirmAction } from './dialogs.js'
import { byId, make } from './dom.js'
import { formBody, formValues, type User, userFields } from './user-view.js'

/**
 * Metadata as JSON, each key and value in its own isolate, so that a bidi control in one (a
 * right-to-left override) cannot reorder the others.
 */
function metadataNodes(metadata: User['metadata']): (Node | string)[] {
  const nodes: (Node | string)[] = ['{']
  for (const [index, [key, value]] of [...metadata].entries()) {
    if (index > 0) nodes.push(',')
    nodes.push(make('bdi', JSON.stringify(key)), ':', make('bdi', JSON.stringify(value)))
  }
  nodes.push('}')
  return nodes
}

/** The region "User details": one user, its actions, and its edit form. */
export interface DetailView {
  open(id: string, opener: HTMLElement | null): Promise<void>
  close(): void
  /** A change from the feed: shown at once, unless the form is being edited. */
  changed(userId: string, deleted: boolean): void
}

export interface DetailHooks {
  /** The user as it now is (undefined: deleted), for the list. */
  readonly saved: (userId: string, user: User | undefined) => void
  /** Where the focus goes when the detail closes. */
  readonly home: () => HTMLElement
}

export function createDetailView(hooks: DetailHooks): DetailView {
  const region = byId('detail', HTMLElement)
  const title = byId('detail-title', HTMLHeadingElement)
  const alert = byId('detail-alert', HTMLDivElement)
  const fields = byId('detail-fields', HTMLDListElement)
  const actions = byId('detail-actions', HTMLDivElement)
  const form = byId('edit-form', HTMLFormElement)
  const edit = byId('edit', HTMLButtonElement)
  const activate = byId('activate', HTMLButtonElement)
  const suspend = byId('suspend', HTMLButtonElement)
  const remove = byId('delete', HTMLButtonElement)
  let user: User | undefined
  // The ETag of the user as shown: what a Save or an action sends as If-Match.
  let etag = ''
  let editing = false
  // A change of the user arrived while its form was being edited: the detail shown is stale.
  let missed = false
  // Counts opens and closes: only the answer of the last open, if no close came after it, is shown.
  let opening = 0

  const render = (): void => {
    if (user === undefined) return
    const metadata = user.metadata
    fields.replaceChildren(
      ...userFields(user).flatMap(([label, text]) => {
        // Each value isolated: text a user typed may carry bidi controls.
        const value = make('dd')
        if (label === 'metadata') value.append(...metadataNodes(metadata))
        else value.append(make('bdi', text))
        return [make('dt', label), value]
      }),
    )
    // From pending, :suspend is a 409: the button says so by being off.
    suspend.disabled = user.status === 'pending'
    fields.hidden = editing
    actions.hidden = editing
    form.hidden = !editing
  }

  const show = (answer: Answer<User>): boolean => {
    if (!answer.ok) {
      showProblem(alert, answer.problem)
      return false
    }
    user = answer.value
    etag = answer.etag
    missed = false
    render()
    hooks.saved(user.id, user)
    return true
  }

  const stopEditing = (): void => {
    editing = false
    clearFieldErrors('edit')
    render()
  }

  /** Shows the user as it now is, when the form being edited let a change go by. */
  const catchUp = (): void => {
    if (!missed || user === undefined) return
    missed = false
    const userId = user.id
    void api.get(userId).then((answer) => {
      if (answer.ok && !editing && user?.id === userId) {
        user = answer.value
        etag = answer.etag
        render()
      }
    })
  }

  const reload = async (): Promise<void> => {
    if (user === undefined) return
    const answer = await api.get(user.id)
    if (!answer.ok) {
      showProblem(alert, answer.problem)
      return
    }
    user = answer.value
    etag = answer.etag
    missed = false
    clearAlert(alert)
    clearFieldErrors('edit')
    fillForm('edit', formValues(user))
    render()
    // The Reload button went with the alert: the focus goes to what now shows the user.
    if (editing) byId('edit-email', HTMLInputElement).focus()
    else title.focus()
  }

  const conflict = (): void => {
    const again = make('button', 'Reload')
    again.type = 'button'
    again.addEventListener('click', () => {
      void reload()
    })
    say(
      alert,
      editing
        ? 'This user was changed meanwhile: Reload loads the current version into the form.'
        : 'This user was changed meanwhile: Reload shows the current version.',
      again,
    )
    again.focus()
  }

  edit.addEventListener('click', () => {
    if (user === undefined) return
    editing = true
    clearAlert(alert)
    fillForm('edit', formValues(user))
    render()
    byId('edit-email', HTMLInputElement).focus()
  })
  byId('edit-cancel', HTMLButtonElement).addEventListener('click', () => {
    stopEditing()
    clearAlert(alert)
    edit.focus()
    catchUp()
  })
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    if (user === undefined) return
    const body = formBody(readForm('edit'))
    clearFieldErrors('edit')
    if (!body.ok) {
      showFieldError('edit', body.field, [body.message])
      document.getElementById(`edit-${body.field}`)?.focus()
      return
    }
    void api.replace(user.id, body.body, etag).then((answer) => {
      if (answer.ok) {
        editing = false
        clearAlert(alert)
        show(answer)
        edit.focus()
      } else if (answer.problem.status === 412) conflict()
      else showFormProblem('edit', alert, answer.problem)
    })
  })

  const act = (button: HTMLButtonElement, action: 'Activate' | 'Suspend' | 'Delete'): void => {
    button.addEventListener('click', () => {
      const shown = user
      if (shown === undefined) return
      confirmAction({
        action,
        email: shown.email,
        opener: button,
        run: () => {
          clearAlert(alert)
          if (action === 'Delete') {
            void api.remove(shown.id, etag).then((answer) => {
              if (answer.ok) {
                hooks.saved(shown.id, undefined)
                view.close()
              } else if (answer.problem.status === 412) conflict()
              else showProblem(alert, answer.problem)
            })
            return
          }
          const verb = action === 'Activate' ? 'activate' : 'suspend'
          void api.transition(shown.id, verb, etag).then((answer) => {
            if (!answer.ok && answer.problem.status === 412) conflict()
            else show(answer)
          })
        },
      })
    })
  }
  act(activate, 'Activate')
  act(suspend, 'Suspend')
  act(remove, 'Delete')

  const view: DetailView = {
    async open(id, opener) {
      const ticket = ++opening
      editing = false
      missed = false
      clearAlert(alert)
      clearFieldErrors('edit')
      const answer = await api.get(id)
      // Another user was opened meanwhile (a slow answer), or the detail closed (a sign-out).
      if (ticket !== opening) return
      region.hidden = false
      if (!show(answer)) {
        fields.replaceChildren()
        actions.hidden = true
      }
      if (opener !== null) title.focus()
    },
    close() {
      opening += 1
      user = undefined
      editing = false
      region.hidden = true
      fields.replaceChildren()
      hooks.home().focus()
    },
    changed(userId, deleted) {
      if (user?.id !== userId || region.hidden) return
      if (deleted) {
        say(alert, 'This user was deleted meanwhile.')
        // A focused action hidden under the focus would drop it to the page.
        const held = actions.contains(document.activeElement)
        actions.hidden = true
        if (held) title.focus()
        return
      }
      // A form being edited keeps what is typed; its Save meets the 412, its Cancel catches up.
      if (editing) {
        missed = true
        return
      }
      void api.get(userId).then((answer) => {
        if (answer.ok && !editing && user?.id === userId) {
          user = answer.value
          etag = answer.etag
          render()
        }
      })
    },
  }
  return view
}
