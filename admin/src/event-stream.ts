/** One Server-Sent Event of the change feed: its id, its type and its JSON data. */
export interface StreamEvent {
  readonly id: string
  readonly event: string
  readonly data: string
}

/**
 * Reads a `text/event-stream` as it arrives, in chunks cut anywhere (the SSE format of the HTML
 * standard: fields per line, an empty line ends an event, `:` starts a comment).
 */
export class SseParser {
  #rest = ''
  #id = ''
  #event = ''
  #data: string[] = []

  /** Feeds a chunk of text; answers the events it completed. */
  push(chunk: string): StreamEvent[] {
    const events: StreamEvent[] = []
    let text = this.#rest + chunk
    // A \r at the very end may be the first half of a \r\n: it waits for the next chunk.
    const held = text.endsWith('\r') ? '\r' : ''
    if (held !== '') text = text.slice(0, -1)
    const lines = text.split(/\r\n|\r|\n/)
    // The last piece has no line end yet.
    this.#rest = (lines.pop() ?? '') + held
    for (const line of lines) {
      if (line === '') {
        if (this.#data.length > 0) {
          events.push({
            id: this.#id,
            event: this.#event || 'message',
            data: this.#data.join('\n'),
          })
        }
        this.#event = ''
        this.#data = []
        continue
      }
      if (line.startsWith(':')) continue
      const colon = line.indexOf(':')
      const field = colon === -1 ? line : line.slice(0, colon)
      let value = colon === -1 ? '' : line.slice(colon + 1)
      if (value.startsWith(' ')) value = value.slice(1)
      if (field === 'id' && !value.includes('\0')) this.#id = value
      else if (field === 'event') this.#event = value
      else if (field === 'data') this.#data.push(value)
    }
    return events
  }
}

/** Whether updates arrive: shown to the user in the page's status line. */
export type LiveState = 'connecting' | 'live' | 'reconnecting' | 'unavailable' | 'stopped'

const SAID: Readonly<Record<LiveState, string>> = {
  connecting: 'Live updates: connecting…',
  live: 'Live updates: on',
  reconnecting: 'Live updates: interrupted, reconnecting…',
  unavailable: 'Live updates: off (this token cannot read events)',
  stopped: '',
}

/** Why the feed refused the token, by the problem's code, where it is not a missing scope. */
const REFUSED = new Map([
  ['token_expired', 'Live updates: off (the token has expired)'],
  ['token_revoked', 'Live updates: off (the token was revoked)'],
  ['token_invalid', 'Live updates: off (the token is not valid)'],
  ['subject_suspended', "Live updates: off (the token's user is suspended)"],
  ['subject_deleted', "Live updates: off (the token's user is deleted)"],
])

/** What the status line says of the feed's state (and, when refused, of its problem's code). */
export function liveStatus(state: LiveState, code?: string): string {
  const refused = state === 'unavailable' && code !== undefined ? REFUSED.get(code) : undefined
  return refused ?? SAID[state]
}

export type FetchLike = (url: string, init: RequestInit) => Promise<Response>

export interface FollowOptions {
  /** The feed's address, relative to the page (`events`). */
  readonly url: string
  readonly token: string
  readonly fetch: FetchLike
  readonly signal: AbortSignal
  readonly onEvent: (event: StreamEvent) => void
  /** `code`: with `unavailable`, the refusal's problem code (`token_expired`…), if it had one. */
  readonly onState: (state: LiveState, code?: string) => void
  /** Where to start; none: at the end of the feed as it is now. */
  readonly lastEventId?: string | undefined
  /** The wait before reconnecting. */
  readonly retryMs?: number | undefined
}

const PAGE = 1000
/** A feed longer than this many pages is followed from where the walk stopped. */
const MAX_PAGES = 50

/** Thrown when the token may not read the feed (401, 403): there is no point in retrying. */
class Refused extends Error {
  readonly code: string | undefined
  constructor(code: string | undefined) {
    super('refused')
    this.code = code
  }
}

/** Another failed answer (a 429, a 503): the next try waits its `Retry-After`, when longer. */
class Failed extends Error {
  readonly waitMs: number
  constructor(res: Response) {
    super(`the feed answered ${res.status}`)
    const seconds = Number(res.headers.get('retry-after') ?? '')
    this.waitMs = Number.isInteger(seconds) && seconds > 0 ? Math.min(seconds, 60) * 1000 : 0
  }
}

/** The refusal of a 401 or 403, with the code its problem body gives. */
async function refusal(res: Response): Promise<Refused> {
  try {
    const body: unknown = await res.json()
    if (typeof body === 'object' && body !== null) {
      const code = (body as Record<string, unknown>)['code']
      if (typeof code === 'string') return new Refused(code)
    }
  } catch {
    // A body that is not a problem says no more than its status.
  }
  return new Refused(undefined)
}

function wait(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener('abort', () => {
      clearTimeout(timer)
      resolve()
    })
  })
}

/**
 * Moves `at` to the end of the feed by following its pages; true once there. A walk cut short (a
 * 429 once the subject's quota is spent) goes on from the page it reached: walked again from the
 * start, a walk longer than the quota would spend every window and never end.
 */
async function feedEnd(options: FollowOptions, at: Position): Promise<boolean> {
  while (at.walked < MAX_PAGES) {
    const query = at.last === undefined ? `?limit=${PAGE}` : `?limit=${PAGE}&after=${at.last}`
    const res = await options.fetch(options.url + query, {
      headers: { authorization: `Bearer ${options.token}`, accept: 'application/json' },
      signal: options.signal,
    })
    if (res.status === 401 || res.status === 403) throw await refusal(res)
    if (!res.ok) throw new Failed(res)
    const body = (await res.json()) as { items: unknown[]; nextCursor: string }
    at.last = body.nextCursor
    at.walked += 1
    if (body.items.length < PAGE) break
  }
  return true
}

/** How far the feed has been read: the last event id seen, or the cursor the stream starts at. */
interface Position {
  last: string | undefined
  /** The pages of the feed read so far by the walk to its end. */
  walked: number
}

/**
 * Reads one stream to its end, handing over each event and moving `at` past it as it goes, so
 * that a stream that fails midway (a dropped connection) still resumes after its last event.
 */
async function readStream(options: FollowOptions, at: Position): Promise<void> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${options.token}`,
    accept: 'text/event-stream',
  }
  if (at.last !== undefined) headers['last-event-id'] = at.last
  const res = await options.fetch(options.url, { headers, signal: options.signal })
  if (res.status === 401 || res.status === 403) throw await refusal(res)
  if (!res.ok || res.body === null) throw new Failed(res)
  options.onState('live')
  const parser = new SseParser()
  const decoder = new TextDecoder()
  const reader = res.body.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return
    for (const event of parser.push(decoder.decode(value, { stream: true }))) {
      at.last = event.id
      options.onEvent(event)
    }
  }
}

/**
 * Follows the change feed live through `fetch` (an EventSource cannot send the token): from the
 * end of the feed (or `lastEventId`), reconnecting after a drop with `Last-Event-ID` so that no
 * event is missed or repeated, until the signal aborts. A token that may not read events ends it
 * at once, as `unavailable`.
 */
export async function followEvents(options: FollowOptions): Promise<void> {
  const { signal } = options
  const retryMs = options.retryMs ?? 1000
  const at: Position = { last: options.lastEventId, walked: 0 }
  let started = at.last !== undefined
  options.onState('connecting')
  while (!signal.aborted) {
    let waitMs = retryMs
    try {
      if (!started) started = await feedEnd(options, at)
      await readStream(options, at)
    } catch (error) {
      if (signal.aborted) break
      if (error instanceof Refused) {
        options.onState('unavailable', error.code)
        return
      }
      if (error instanceof Failed) waitMs = Math.max(retryMs, error.waitMs)
    }
    if (signal.aborted) break
    options.onState('reconnecting')
    await wait(waitMs, signal)
  }
  options.onState('stopped')
}
