// A paced load generator for the benchmark, in a child process of its own (forked by webhooks.ts,
// compiled to plain JavaScript): POST /users at a fixed rate over keep-alive connections, open
// loop (a request is sent when it is due, whether or not the earlier ones have been answered), so
// that the rate is the one asked for as long as the service keeps up.
//
//   BENCH_AUTH='Bearer …' node paced-writer.mjs <service url> <writes per second> <seconds>
//
// Sends one message over IPC when every request has been answered (or after a grace period):
// {"sent":n,"ids":[…ids of the users created (201)],"failed":n,"seconds":s (first request to last
// answer),"p50Ms":…,"p99Ms":…} (the writes' latencies).
import { randomBytes } from 'node:crypto'
import { Agent, request } from 'node:http'

const [url = '', rateText = '', secondsText = ''] = process.argv.slice(2)
const rate = Number(rateText)
const seconds = Number(secondsText)
const auth = process.env['BENCH_AUTH'] ?? ''
/** Enough sockets that a request is never queued behind another at this rate and latency. */
const agent = new Agent({ keepAlive: true, maxSockets: 256 })
const prefix = randomBytes(4).toString('hex')
const ID = /"id":"([0-9a-f-]{36})"/
const GRACE_MS = 30_000

const ids: string[] = []
const latencies: number[] = []
let sent = 0
let answered = 0
let failed = 0
/** ms from the first request to the last answer: the rate the service actually took. */
let lastAnswerMs = 0

const post = (n: number): void => {
  const body = JSON.stringify({ email: `paced-${prefix}-${n}@bench.example.com`, name: 'Bench' })
  const started = performance.now()
  const req = request(
    `${url}/users`,
    {
      method: 'POST',
      agent,
      headers: {
        authorization: auth,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
      },
    },
    (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        text += chunk
      })
      res.on('end', () => {
        answered += 1
        lastAnswerMs = performance.now() - t0
        latencies.push(performance.now() - started)
        const id = ID.exec(text)?.[1]
        if (res.statusCode === 201 && id !== undefined) ids.push(id)
        else failed += 1
      })
    },
  )
  req.on('error', () => {
    answered += 1
    failed += 1
  })
  req.end(body)
}

const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0
}

const total = Math.round(rate * seconds)
const t0 = performance.now()

/** Every ms (or as soon as the loop gets to it), sends the requests that are due by now. */
const tick = (): void => {
  const elapsed = performance.now() - t0
  const due = Math.min(total, Math.floor((elapsed * rate) / 1000) + 1)
  while (sent < due) post(sent++)
  if (sent < total) {
    setTimeout(tick, 1)
    return
  }
  const graceUntil = performance.now() + GRACE_MS
  const settle = (): void => {
    if (answered < sent && performance.now() < graceUntil) {
      setTimeout(settle, 10)
      return
    }
    // Requests still unanswered count as failed.
    failed += sent - answered
    process.send?.(
      {
        sent,
        ids,
        failed,
        seconds: lastAnswerMs / 1000,
        p50Ms: quantile(latencies, 0.5),
        p99Ms: quantile(latencies, 0.99),
      },
      () => process.exit(0),
    )
  }
  settle()
}
tick()
