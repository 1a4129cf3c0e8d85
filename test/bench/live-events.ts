// Live event latency (§10): from the moment a write is acknowledged (its 201 has arrived whole at
// the writer) to the moment its event's SSE frame arrives at a subscriber. Both times are taken in
// this process, on one clock. The writers create users as fast as the server answers them, at the
// same concurrency as the POST case; one subscriber reads GET /events (text/event-stream).

import { randomBytes } from 'node:crypto'
import { Agent, type IncomingMessage, request } from 'node:http'

export interface LiveResult {
  /** ms from acknowledgement to frame, one per write whose frame arrived; 0 when the frame came first. */
  latencies: number[]
  /** Writes acknowledged. */
  acknowledged: number
  /** Frames that arrived before their write's acknowledgement (counted as 0 ms). */
  framesFirst: number
  /** Acknowledged writes whose frame never arrived within the grace period. */
  missing: number
  /** Answers other than 201. */
  errors: number
}

const USER_ID = /"userId":"([0-9a-f-]{36})"/g
const ID = /"id":"([0-9a-f-]{36})"/
const GRACE_MS = 2000

/** Opens the stream; resolves once its headers have arrived, with a stop function. */
const subscribe = (
  url: string,
  after: string | undefined,
  auth: string | undefined,
  arrived: Map<string, number>,
): Promise<() => void> =>
  new Promise((resolve, reject) => {
    const headers: Record<string, string> = { accept: 'text/event-stream' }
    if (auth !== undefined) headers['authorization'] = auth
    const query = after === undefined ? '' : `?after=${after}`
    const req = request(`${url}/events${query}`, { headers, agent: false })
    req.on('error', reject)
    req.on('response', (res: IncomingMessage) => {
      if (res.statusCode !== 200) {
        reject(new Error(`GET /events: ${res.statusCode}`))
        res.resume()
        return
      }
      res.setEncoding('utf8')
      let rest = ''
      res.on('data', (chunk: string) => {
        const at = performance.now()
        // Frames end with a blank line; a frame split across chunks waits for its end.
        const text = rest + chunk
        const end = text.lastIndexOf('\n\n')
        if (end === -1) {
          rest = text
          return
        }
        rest = text.slice(end + 2)
        for (const match of text.slice(0, end).matchAll(USER_ID)) {
          const id = match[1]
          if (id !== undefined && !arrived.has(id)) arrived.set(id, at)
        }
      })
      res.on('error', () => undefined)
      resolve(() => {
        req.destroy()
      })
    })
    req.end()
  })

/** One POST /users; resolves with the new id and when its answer had arrived whole. */
const create = (
  url: string,
  auth: string | undefined,
  agent: Agent,
  email: string,
): Promise<{ id: string | undefined; at: number; status: number }> =>
  new Promise((resolve, reject) => {
    const body = JSON.stringify({ email, name: 'Bench' })
    const headers: Record<string, string | number> = {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    }
    if (auth !== undefined) headers['authorization'] = auth
    const req = request(`${url}/users`, { method: 'POST', headers, agent }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        text += chunk
      })
      res.on('end', () => {
        resolve({ id: ID.exec(text)?.[1], at: performance.now(), status: res.statusCode ?? 0 })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })

export interface LiveOptions {
  url: string
  /** The Authorization header (a token with users:write and events:read); none for the reference. */
  auth: string | undefined
  durationS: number
  writers: number
}

/**
 * Where the feed ends now: the last page's `nextCursor`, read through GET /events. A stream opened
 * without a cursor starts at the oldest retained event (§10): each run's subscriber would first
 * replay every earlier run's events, and that replay, not the live path, would set the p99.
 */
const headCursor = async (url: string, auth: string): Promise<string | undefined> => {
  let after: string | undefined
  for (;;) {
    const query = after === undefined ? 'limit=1000' : `limit=1000&after=${after}`
    const res = await fetch(`${url}/events?${query}`, { headers: { authorization: auth } })
    if (res.status !== 200) throw new Error(`GET /events: ${res.status}`)
    const page = (await res.json()) as { items: unknown[]; nextCursor: string }
    after = page.nextCursor
    if (page.items.length === 0) return after
  }
}

/**
 * Runs `writers` creating users for `durationS` seconds against a server with one subscriber,
 * which starts at the head of the feed (the reference has no history: it starts there anyway).
 */
export const measureLiveEvents = async (options: LiveOptions): Promise<LiveResult> => {
  const arrived = new Map<string, number>()
  const acked = new Map<string, number>()
  const after = options.auth === undefined ? undefined : await headCursor(options.url, options.auth)
  const stop = await subscribe(options.url, after, options.auth, arrived)
  const agent = new Agent({ keepAlive: true, maxSockets: options.writers })
  const prefix = randomBytes(4).toString('hex')
  let counter = 0
  let errors = 0
  const until = performance.now() + options.durationS * 1000
  try {
    await Promise.all(
      Array.from({ length: options.writers }, async () => {
        while (performance.now() < until) {
          counter += 1
          const email = `live-${prefix}-${counter}@bench.example.com`
          const answer = await create(options.url, options.auth, agent, email)
          if (answer.status !== 201 || answer.id === undefined) errors += 1
          else acked.set(answer.id, answer.at)
        }
      }),
    )
    const graceUntil = performance.now() + GRACE_MS
    while (performance.now() < graceUntil && [...acked.keys()].some((id) => !arrived.has(id)))
      await new Promise((resolve) => setTimeout(resolve, 20))
  } finally {
    stop()
    agent.destroy()
  }
  const latencies: number[] = []
  let framesFirst = 0
  let missing = 0
  for (const [id, ackAt] of acked) {
    const frameAt = arrived.get(id)
    if (frameAt === undefined) {
      missing += 1
      continue
    }
    if (frameAt < ackAt) framesFirst += 1
    latencies.push(Math.max(0, frameAt - ackAt))
  }
  return { latencies, acknowledged: acked.size, framesFirst, missing, errors }
}

/** The q-quantile (0..1) of `values`, nearest rank. */
export const quantile = (values: readonly number[], q: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank] ?? Number.NaN
}
