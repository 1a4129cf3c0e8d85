import { byId } from './dom.js'
import { followEvents, liveStatus, type StreamEvent } from './event-stream.js'
import { isUser, readJson, type User } from './user-view.js'

/** What a change of the feed means to the page. */
export interface Change {
  readonly type: string
  readonly userId: string
  /** The user after the change; none for a deletion. */
  readonly user: User | undefined
}

export function readChange(event: StreamEvent): Change | undefined {
  let data: unknown
  try {
    data = readJson(event.data)
  } catch {
    return undefined
  }
  if (typeof data !== 'object' || data === null) return undefined
  const { userId, user } = data as Record<string, unknown>
  if (typeof userId !== 'string') return undefined
  return { type: event.event, userId, user: isUser(user) ? user : undefined }
}

/**
 * Follows the change feed while signed in, saying in the page's status line whether updates are
 * live. Answers the function that stops it.
 */
export function followChanges(token: string, apply: (change: Change) => void): () => void {
  const status = byId('live', HTMLParagraphElement)
  const stop = new AbortController()
  void followEvents({
    url: 'events',
    token,
    fetch: (url, init) => fetch(url, init),
    signal: stop.signal,
    onState: (state, code) => {
      status.textContent = liveStatus(state, code)
    },
    onEvent: (event) => {
      const change = readChange(event)
      if (change !== undefined) apply(change)
    },
  })
  return () => {
    stop.abort()
  }
}
