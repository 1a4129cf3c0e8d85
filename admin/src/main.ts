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
// A sign-in that was under way at a sign-out shows nothing after it.
let signOuts = 0
// The sign-outs counted when the sign-in under way began: a second submit (a double click, Enter
// twice) is let go while it runs, so that one page never holds two streams; one after a sign-out
// is not.
let entering: number | undefined

/** Signed in with `token` once the service accepts it: the list, then the feed. */
async function enter(token: string, focus: boolean): Promise<boolean> {
  const started = signOuts
  const first = await api.list({ q: '', cursor: undefined }, token)
  if (started !== signOuts) return false
  // A token that lacks users:read is one the service accepts: the rest of the page works with it,
  // and the list shows the service's 403 (docs/admin-page.md).
  if (!first.ok && first.problem.code !== 'insufficient_scope') {
    session.forget()
    showProblem(signInAlert, first.problem)
    return false
  }
  // Kept only now that the service took it: a token it refuses never outlives the attempt.
  session.keep(token)
  clearAlert(signInAlert)
  tokenInput.value = ''
  signInView.hidden = true
  app.hidden = false
  signOut.hidden = false
  await list.load()
  if (started !== signOuts) return false
  if (focus) byId('search', HTMLInputElement).focus()
  stopFollowing?.()
  stopFollowing = followChanges(token, (change) => {
    if (change.type === 'user.created') list.created()
    else list.changed(change.userId, change.user)
    detail.changed(change.userId, change.type === 'user.deleted')
  })
  return true
}

/** Runs one sign-in at a time; the focus goes back to the token when it fails. */
function trySignIn(token: string, focus: boolean): void {
  if (entering === signOuts) return
  const started = signOuts
  entering = started
  void enter(token, focus)
    .then((entered) => {
      if (!entered && focus && !signInView.hidden) tokenInput.focus()
    })
    .finally(() => {
      if (entering === started) entering = undefined
    })
}

byId('sign-in', HTMLFormElement).addEventListener('submit', (event) => {
  event.preventDefault()
  const token = tokenInput.value.trim()
  if (token === '') {
    tokenInput.focus()
    return
  }
  trySignIn(token, true)
})

signOut.addEventListener('click', () => {
  signOuts += 1
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
const kept = session.token()
if (kept !== null) trySignIn(kept, false)
