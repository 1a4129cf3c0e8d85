import { clearAlert, showProblem } from './alerts.js'
import { api, session } from './api.js'
import { createDetailView } from './detail-view.js'
import { byId } from './dom.js'
import { createListView } from './list-view.js'
import { followChanges } from './live.js'
import { setUpNewUser } from './new-user.js'

const signInView = byId('sign-in-view', HTMLElement)
const signInAlert = byId('sign-in-alert', HTMLDivElement)
const tokenInput = byId('token', HTMLInputElement)
const app = byId('app', HTMLDivElement)
const signOut = byId('sign-out', HTMLButtonElement)
const newUser = byId('new-user', HTMLButtonElement)
const status = byId('live', HTMLParagraphElement)

const detail = createDetailView({
  saved: (userId, user) => {
    list.changed(userId, user)
  },
  home: () => newUser,
})
const list = createListView((id, opener) => {
  void detail.open(id, opener)
})
setUpNewUser((user) => {
  list.created()
  void detail.open(user.id, newUser)
})

let stopFollowing: (() => void) | undefined

/** Signed in: the list, then the feed. */
async function enter(focus: boolean): Promise<boolean> {
  const token = session.token()
  if (token === null) return false
  const first = await api.list({ q: '', cursor: undefined })
  if (!first.ok) {
    session.forget()
    showProblem(signInAlert, first.problem)
    return false
  }
  clearAlert(signInAlert)
  tokenInput.value = ''
  signInView.hidden = true
  app.hidden = false
  signOut.hidden = false
  await list.load()
  if (focus) byId('search', HTMLInputElement).focus()
  stopFollowing = followChanges(token, (change) => {
    if (change.type === 'user.created') list.created()
    else list.changed(change.userId, change.user)
    detail.changed(change.userId, change.type === 'user.deleted')
  })
  return true
}

byId('sign-in', HTMLFormElement).addEventListener('submit', (event) => {
  event.preventDefault()
  const token = tokenInput.value.trim()
  if (token === '') {
    tokenInput.focus()
    return
  }
  session.keep(token)
  void enter(true).then((entered) => {
    if (!entered) tokenInput.focus()
  })
})

signOut.addEventListener('click', () => {
  stopFollowing?.()
  stopFollowing = undefined
  session.forget()
  status.textContent = ''
  detail.close()
  list.reset()
  clearAlert(byId('page-alert', HTMLDivElement))
  app.hidden = true
  signOut.hidden = true
  signInView.hidden = false
  tokenInput.focus()
})

// A reload of the tab keeps the session (sessionStorage lives as long as the tab).
void enter(false)
