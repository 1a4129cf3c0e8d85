import { byId, make } from './dom.js'

const FOCUSABLE = 'button:not([disabled]), input:not([disabled]), textarea:not([disabled]), a[href]'

/** One opening of a dialog, until it closes. */
interface Opening {
  /** Removes its listeners and runs its close hook; `refocus` gives the focus back first. */
  finish(refocus: boolean): void
}

const openings = new WeakMap<HTMLDialogElement, Opening>()

/**
 * Closes a dialog opened with openDialog, at once: its listeners go and the focus returns now, not
 * when the `close` event comes (Chromium runs a key press before that event, so a dialog opened
 * again by a quick key would otherwise lose its new listeners to the old opening's event).
 */
export function closeDialog(dialog: HTMLDialogElement): void {
  if (dialog.open) dialog.close()
  openings.get(dialog)?.finish(true)
}

/**
 * Opens a modal `<dialog>` (the rest of the page turns inert), focusing its first field or button;
 * Tab and Shift+Tab cycle inside it; Escape and closeDialog give the focus back to the opener (the
 * WAI-ARIA dialog pattern), then run `closed`.
 */
export function openDialog(
  dialog: HTMLDialogElement,
  opener: HTMLElement | null,
  closed: () => void = () => undefined,
): void {
  // An opening whose close this code has not seen yet (Escape closes without asking) ends here.
  openings.get(dialog)?.finish(false)
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
  const onCancel = (event: Event): void => {
    event.preventDefault()
    closeDialog(dialog)
  }
  // A close made elsewhere (Escape without a cancel event); a stale event finds the dialog open.
  const onClose = (): void => {
    if (!dialog.open) openings.get(dialog)?.finish(true)
  }
  const opening: Opening = {
    finish(refocus) {
      if (openings.get(dialog) !== opening) return
      openings.delete(dialog)
      dialog.removeEventListener('keydown', trap)
      dialog.removeEventListener('cancel', onCancel)
      dialog.removeEventListener('close', onClose)
      if (refocus && opener?.isConnected === true && !opener.hidden) opener.focus()
      closed()
    },
  }
  openings.set(dialog, opening)
  dialog.addEventListener('keydown', trap)
  dialog.addEventListener('cancel', onCancel)
  dialog.addEventListener('close', onClose)
  dialog.showModal()
  dialog.querySelector<HTMLElement>(FOCUSABLE)?.focus()
}

export interface Confirmation {
  /** The action, as the button says it: Suspend, Activate, Delete. */
  readonly action: string
  readonly email: string
  readonly opener: HTMLElement
  /** Runs when the action's button is pressed, once the dialog has closed. */
  readonly run: () => void
}

/** Asks first: a modal dialog naming the action and the user; Cancel or Escape does nothing. */
export function confirmAction(confirmation: Confirmation): void {
  const dialog = byId('confirm', HTMLDialogElement)
  // One question at a time: a second activation of the same button while it is open asks nothing.
  if (dialog.open) return
  const title = byId('confirm-title', HTMLHeadingElement)
  const go = byId('confirm-go', HTMLButtonElement)
  const cancel = byId('confirm-cancel', HTMLButtonElement)
  // The email isolated: a bidi control in it cannot reorder the words around it.
  title.replaceChildren(`${confirmation.action} `, make('bdi', confirmation.email), '?')
  go.textContent = confirmation.action
  go.classList.toggle('danger', confirmation.action === 'Delete')
  let chosen = false
  const onGo = (): void => {
    chosen = true
    closeDialog(dialog)
  }
  const onCancel = (): void => {
    closeDialog(dialog)
  }
  go.addEventListener('click', onGo)
  cancel.addEventListener('click', onCancel)
  openDialog(dialog, confirmation.opener, () => {
    go.removeEventListener('click', onGo)
    cancel.removeEventListener('click', onCancel)
    if (chosen) confirmation.run()
  })
}
