import { type ClientRequest, type IncomingMessage, request } from 'node:http'

export interface SseEvent {
  id: string
  event: string
  data: string
}

/** A Server-Sent Events client over node:http that keeps every event and comment it reads. */
export interface SseClient {
  readonly status: number
  readonly headers: IncomingMessage['headers']
  readonly events: SseEvent[]
  readonly comments: string[]
  /** Resolves when the server ends the stream (or the connection drops). */
  readonly ended: Promise<void>
  /** Waits until at least `count` events arrived (fails after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<void>
  waitForComment(timeoutMs?: number): Promise<void>
  /** Waits until at least `count` comment lines arrived (heartbeats, the last word of a stream). */
  waitForComments(count: number, timeoutMs?: number): Promise<void>
  close(): void
  readonly response: IncomingMessage
  readonly req: ClientRequest
}

export function openSse(
  url: string,
  token: string,
  headers: Record<string, string> = {},
): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      headers: { accept: 'text/event-stream', authorization: `Bearer ${token}`, ...headers },
    })
    req.on('error', reject)
    req.on('response', (res) => {
      const events: SseEvent[] = []
      const comments: string[] = []
      let buffer = ''
      let notify: (() => void) | undefined
      const ended = new Promise<void>((done) => {
        res.on('end', done)
        res.on('close', done)
        res.on('error', () => {
          done()
        })
      })
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        buffer += chunk
        for (;;) {
          const end = buffer.indexOf('\n\n')
          if (end === -1) break
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const event: SseEvent = { id: '', event: '', data: '' }
          let isEvent = false
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line)
            else {
              const colon = line.indexOf(': ')
              const field = line.slice(0, colon)
              const value = line.slice(colon + 2)
              if (field === 'id' || field === 'event' || field === 'data') {
                event[field] = value
                isEvent = true
              }
            }
          }
          if (isEvent) events.push(event)
        }
        notify?.()
      })
      const wait = (done: () => boolean, timeoutMs: number, what: string): Promise<void> =>
        new Promise((ok, fail) => {
          if (done()) return ok()
          const timer = setTimeout(() => {
            fail(new Error(`timed out waiting for ${what} (have ${events.length} events)`))
          }, timeoutMs)
          const previous = notify
          notify = () => {
            previous?.()
            if (done()) {
              clearTimeout(timer)
              ok()
            }
          }
          void ended.then(() => {
            if (!done()) {
              clearTimeout(timer)
              fail(
                new Error(
                  `the stream ended while waiting for ${what} (have ${events.length} events)`,
                ),
              )
            }
          })
        })
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        events,
        comments,
        ended,
        response: res,
        req,
        waitFor: (count, timeoutMs = 20_000) =>
          wait(() => events.length >= count, timeoutMs, `${count} events`),
        waitForComment: (timeoutMs = 20_000) =>
          wait(() => comments.length > 0, timeoutMs, 'a comment'),
        waitForComments: (count, timeoutMs = 20_000) =>
          wait(() => comments.length >= count, timeoutMs, `${count} comments`),
        close: () => {
          req.destroy()
        },
      })
    })
    req.end()
  })
}
