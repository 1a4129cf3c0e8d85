// A webhook receiver for the benchmark, bare node:http and nothing else, in a child process of its
// own (forked by webhooks.ts, compiled to plain JavaScript) so that it shares no event loop with
// the bench or the service. It answers every request 204 at once.
//
//   node webhook-receiver.mjs count    only counts deliveries (the POST /users case)
//   node webhook-receiver.mjs record   also records, per webhook-id, the first arrival's lag:
//                                      its wall-clock time minus the body's `timestamp` (the
//                                      event's `time`, whole milliseconds), and its userId
//
// It sends {"port":n} over IPC once listening, then answers the bench's messages:
// {"ask":"count"} → {"count":n} (distinct webhook-ids since the last take);
// {"ask":"take"} → {"deliveries":[[userId, lagMs], …], "duplicates":n}, and starts afresh.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

const record = process.argv[2] === 'record'

let seen = new Set<string>()
let deliveries: [string, number][] = []
let duplicates = 0

/** The wall clock with sub-millisecond resolution (Date.now() is whole milliseconds). */
const nowMs = (): number => performance.timeOrigin + performance.now()

const userIdOf = (body: unknown): string => {
  if (typeof body !== 'object' || body === null || !('data' in body)) return ''
  const data = body.data
  if (typeof data !== 'object' || data === null || !('userId' in data)) return ''
  return typeof data.userId === 'string' ? data.userId : ''
}

const timestampOf = (body: unknown): number =>
  typeof body === 'object' && body !== null && 'timestamp' in body
    ? Date.parse(String(body.timestamp))
    : Number.NaN

const server = createServer((req, res) => {
  const arrived = nowMs()
  const id = req.headers['webhook-id']
  const chunks: Buffer[] = []
  req.on('data', (chunk: Buffer) => {
    if (record) chunks.push(chunk)
  })
  req.on('end', () => {
    res.writeHead(204).end()
    if (typeof id !== 'string') return
    if (seen.has(id)) {
      duplicates += 1
      return
    }
    seen.add(id)
    if (!record) return
    const body: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    deliveries.push([userIdOf(body), arrived - timestampOf(body)])
  })
})
server.keepAliveTimeout = 60_000

process.on('message', (message: unknown) => {
  const ask = typeof message === 'object' && message !== null && 'ask' in message && message.ask
  if (ask === 'count') process.send?.({ count: seen.size })
  else if (ask === 'take') {
    process.send?.({ deliveries, duplicates })
    seen = new Set()
    deliveries = []
    duplicates = 0
  }
})
// The bench went away: so does the receiver.
process.on('disconnect', () => process.exit(0))

server.listen(0, '127.0.0.1', () => {
  process.send?.({ port: (server.address() as AddressInfo).port })
})
