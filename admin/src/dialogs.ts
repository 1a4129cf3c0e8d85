import { byId } from './dom.js'

const FOCUSABLE = 'button:not([disabled]), input:not([disabled]), textarea:not([disabled]), a[href]'

/**
 * Opens a modal `<dialog>` (the rest of the page turns inert), focusing its first field or button;
 * Tab and Shift+Tab cycle inside it; Escape and close() give the focus back to the opener (the
 * WAI-ARIA dialog pattern).
 */
export function openDialog(dialog: HTMLDialogElement, opener: HTMLElement | null): void {
  const trap = (event: KeyboardEvent): void => {
    if (event.key !== 'Tab') return
    const items = [...dialog.querySelectorAll<HTMLElement>(FOCUSABLE)].filter(
      (item) => !item.hidden,
    )
    const first = items[0]
    const last = items[items.length - 1]
    if (first === undefined || last === undefined) return
    if (event.shiftKey && document.activeElement === first) {
      event.preventDefault()
      last.focus()
    } else if (!event.shiftKey && document.activeElement === last) {
      event.preventDefault()
      first.focus()
    }
  }
  dialog.addEventListener('keydown', trap)
  dialog.addEventListener(
    'close',
    () => {
      dialog.removeEventListener('keydown', trap)
      if (opener?.isConnected === true && !opener.hidden) opener.focus()
    },
    { once: true },
  )
  dialog.showModal()
  dialog.querySelector<HTMLElement>(FOCUSABLE)?.focus()
}

export interface Confirmation {
  /** The action, as the button says it: Suspend, Activate, Delete. */
  readonly action: string
  readonly email: string
  readonly opener: HTMLElement
  /** Runs when the action's button is pressed; the dialog closes first. */
  readonly run: () => void
}

/** Asks first: a modal dialog naming the action and the user; Cancel or Escape does nothing. */
export function confirmAction(confirmation: Confirmation): void {
  const dialog = byId('confirm', HTMLDialogElement)
  const title = byId('confirm-title', HTMLHeadingElement)
  const go = byId('confirm-go', HTMLButtonElement)
  const cancel = byId('confirm-cancel', HTMLButtonElement)
  title.textContent = `${confirmation.action} ${confirmation.email}?`
  go.textContent = confirmation.action
  go.classList.toggle('danger', confirmation.action === 'Delete')
  let chosen = false
  const onGo = (): void => {
    chosen = true
    dialog.close()
  }
  const onCancel = (): void => {
    dialog.close()
  }
  go.addEventListener('click', onGo)
  cancel.addEventListener('click', onCancel)
  dialog.addEventListener(
    'close',
    () => {
      go.removeEventListener('click', onGo)
      cancel.removeEventListener('click', onCancel)
      if (chosen) confirmation.run()
    },
    { once: true },
  )
  openDialog(dialog, confirmation.opener)
}
