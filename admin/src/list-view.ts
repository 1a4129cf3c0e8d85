import { clearAlert, showProblem } from './alerts.js'
import { api } from './api.js'
import { byId, make } from './dom.js'
import type { User } from './user-view.js'

/** The list of users: newest first, 20 a page, searched with `q`, paged with cursors. */
export interface ListView {
  /** Loads the current page again (the first after a new search). */
  load(): Promise<void>
  /** Back to the first page without a search, emptied (signing out). */
  reset(): void
  /** A change from the feed or from this page: the row is replaced or removed where shown. */
  changed(userId: string, user: User | undefined): void
  /** A user was created: shown when the first page without a search is on screen. */
  created(): void
}

const SEARCH_DELAY_MS = 250
/** New users arriving together (an import) reload the first page once per this time. */
const CREATED_RELOAD_MS = 150

/** A table cell holding user-typed text in an isolate. */
function isolated(text: string): HTMLTableCellElement {
  const cell = make('td')
  cell.append(make('bdi', text))
  return cell
}

function shownTime(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`
}

export function createListView(openUser: (id: string, opener: HTMLElement) => void): ListView {
  const body = byId('users-body', HTMLTableSectionElement)
  const empty = byId('users-empty', HTMLParagraphElement)
  const search = byId('search', HTMLInputElement)
  const previous = byId('previous-page', HTMLButtonElement)
  const next = byId('next-page', HTMLButtonElement)
  const alert = byId('page-alert', HTMLDivElement)
  let q = ''
  // The cursor of each page walked to, the current one last (undefined: the first page).
  let cursors: (string | undefined)[] = [undefined]
  let nextCursor: string | null = null
  let items: User[] = []
  let loading = 0
  /** The reload a new user asked for, while it waits. */
  let reload: ReturnType<typeof setTimeout> | undefined

  const render = (): void => {
    // A row re-drawn keeps the focus on its email.
    const focused = document.activeElement
    const focusedId = focused instanceof HTMLElement ? focused.dataset['userId'] : undefined
    body.replaceChildren(
      ...items.map((user) => {
        const row = make('tr')
        // Text a user typed is isolated: a bidi control in it stays inside its own element.
        const open = make('button')
        open.append(make('bdi', user.email))
        open.type = 'button'
        open.className = 'link'
        open.dataset['userId'] = user.id
        open.addEventListener('click', () => {
          openUser(user.id, open)
        })
        const email = make('td')
        email.append(open)
        row.append(
          email,
          isolated(user.name),
          make('td', user.status),
          make('td', shownTime(user.updatedAt)),
        )
        return row
      }),
    )
    empty.hidden = items.length > 0
    previous.disabled = cursors.length <= 1
    next.disabled = nextCursor === null
    if (focusedId !== undefined) {
      body.querySelector<HTMLElement>(`[data-user-id="${CSS.escape(focusedId)}"]`)?.focus()
    }
  }

  const load = async (): Promise<void> => {
    const ticket = ++loading
    const answer = await api.list({ q, cursor: cursors[cursors.length - 1] })
    // Only the last request asked for is shown (a search typed fast sends several).
    if (ticket !== loading) return
    if (!answer.ok) {
      showProblem(alert, answer.problem)
      return
    }
    // A problem shown before (a search refused) is over once a list comes.
    clearAlert(alert)
    items = [...answer.value.items]
    nextCursor = answer.value.nextCursor
    render()
  }

  let timer: ReturnType<typeof setTimeout> | undefined
  const searchNow = (): void => {
    clearTimeout(timer)
    if (search.value === q) return
    q = search.value
    cursors = [undefined]
    void load()
  }
  search.addEventListener('input', () => {
    clearTimeout(timer)
    timer = setTimeout(searchNow, SEARCH_DELAY_MS)
  })
  byId('search-form', HTMLFormElement).addEventListener('submit', (event) => {
    event.preventDefault()
    searchNow()
  })
  next.addEventListener('click', () => {
    if (nextCursor === null) return
    cursors = [...cursors, nextCursor]
    void load().then(() => {
      // A button disabled under the focus would drop it to the page.
      if (next.disabled) previous.focus()
    })
  })
  previous.addEventListener('click', () => {
    if (cursors.length <= 1) return
    cursors = cursors.slice(0, -1)
    void load().then(() => {
      if (previous.disabled) next.focus()
    })
  })

  return {
    load,
    // On sign-out: nothing asked for before it (a search typed, a reload for a new user, a page
    // on its way) may be sent or shown after it, without the token or under the next one.
    reset() {
      clearTimeout(timer)
      clearTimeout(reload)
      reload = undefined
      loading += 1
      q = ''
      search.value = ''
      cursors = [undefined]
      nextCursor = null
      items = []
      render()
    },
    changed(userId, user) {
      const at = items.findIndex((item) => item.id === userId)
      if (at === -1) return
      const shown = items[at]
      if (user === undefined) items = items.filter((item) => item.id !== userId)
      else if (shown !== undefined && user.version >= shown.version) items[at] = user
      render()
    },
    created() {
      if (cursors.length !== 1 || q !== '' || reload !== undefined) return
      reload = setTimeout(() => {
        reload = undefined
        if (cursors.length === 1 && q === '') void load()
      }, CREATED_RELOAD_MS)
    },
  }
}
