// The webhook cases of the benchmark (docs/webhooks.md), run by run.ts:
// - `POST /users with a webhook endpoint`: wrk POST /users on a fresh file-store service with one
//   endpoint registered, pointing at a receiver that answers 204 at once (webhook-receiver.ts, a
//   child process of its own), against a second fresh service of the same size with none.
// - `webhook delivery lag`: one service with one endpoint; a paced writer (paced-writer.ts, a
//   child process) creates `lagRate` users per second for BENCH_DURATION_S seconds; the receiver
//   records each event's arrival time minus its `time`. Every acknowledged write must be delivered.
import { randomBytes } from 'node:crypto'

import { quantile } from './live-events.js'
import type { WebhookLagResult, WebhookLagRun } from './results-types.js'
import { makeToken } from './token.js'
import { fields, pacedWrites, type Receiver, startReceiver } from './webhook-children.js'

/** Both services of each case may deliver to a receiver on loopback. */
const WEBHOOK_ENV = { WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8' } as const
/** The catch-up wait after a paced run ends once no delivery has come for this long. */
const STALL_MS = 5000
const FIRST_DELIVERY_MS = 10_000
const DRAIN_MS = 300_000

/** A service run.ts started on a fresh, seeded file store. */
export interface BenchService {
  url: string
  pid: number
  close: () => Promise<void>
}

/** What run.ts lends these cases. */
export interface WebhookBenchContext {
  secret: string
  /** The Authorization header of the user writes. */
  auth: string
  durationS: number
  runs: number
  /** Writes per second of the lag case (BENCH_WEBHOOK_RATE). */
  lagRate: number
  warmupS: number
  log: (line: string) => void
  startService: (users: number, env: Readonly<Record<string, string>>) => Promise<BenchService>
  postScript: () => string
}

/** What run.ts's runCase needs of one server (the same shape as its Target). */
interface WebhookTarget {
  url: string
  pid: number
  script: () => Promise<string>
}

export interface WebhookCaseSetup {
  service: WebhookTarget
  reference: WebhookTarget
  close: () => Promise<void>
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const closingOnError = async <T>(close: () => Promise<void>, fn: () => Promise<T>): Promise<T> => {
  try {
    return await fn()
  } catch (err) {
    await close().catch(() => undefined)
    throw err
  }
}

const adminHeaders = (ctx: WebhookBenchContext): Record<string, string> => ({
  authorization: `Bearer ${makeToken(ctx.secret, 3600, 'webhooks:admin')}`,
  'content-type': 'application/json',
})

/** GET `path` of `url` and its JSON body; throws on another status than 200. */
const getJson = async (
  url: string,
  path: string,
  headers: Record<string, string>,
): Promise<Record<string, unknown>> => {
  const res = await fetch(`${url}${path}`, { headers })
  const text = await res.text()
  if (res.status !== 200) throw new Error(`GET ${path}: expected 200, got ${res.status}: ${text}`)
  return fields(JSON.parse(text))
}

/** POST /webhooks: one endpoint, every event type, delivering to `target`; its id. */
const register = async (ctx: WebhookBenchContext, url: string, target: string): Promise<string> => {
  const res = await fetch(`${url}/webhooks`, {
    method: 'POST',
    headers: adminHeaders(ctx),
    body: JSON.stringify({ url: target, description: 'bench receiver' }),
  })
  const text = await res.text()
  if (res.status !== 201)
    throw new Error(`POST /webhooks: expected 201, got ${res.status}: ${text}`)
  const id = fields(JSON.parse(text))['id']
  if (typeof id !== 'string') throw new Error(`POST /webhooks: no id in ${text}`)
  return id
}

/**
 * Waits until the endpoint's cursor is at the head of the feed (no event after it: every write so
 * far delivered), so that one wrk run's backlog is not delivered during the next run.
 */
const drain = async (ctx: WebhookBenchContext, url: string, hookId: string): Promise<void> => {
  const started = performance.now()
  for (;;) {
    const { after } = await getJson(url, `/webhooks/${hookId}/cursor`, adminHeaders(ctx))
    const page = await getJson(url, `/events?after=${String(after)}&limit=1`, {
      authorization: ctx.auth,
    })
    if (Array.isArray(page['items']) && page['items'].length === 0) break
    if (performance.now() - started > DRAIN_MS)
      throw new Error(`webhook deliveries not caught up after ${DRAIN_MS} ms`)
    await sleep(50)
  }
  const waited = performance.now() - started
  if (waited > 100) ctx.log(`  webhook deliveries caught up after ${waited.toFixed(0)} ms`)
}

/** One POST /users through fetch, so that a broken service fails loudly before the load. */
const createOne = async (ctx: WebhookBenchContext, url: string): Promise<void> => {
  const res = await fetch(`${url}/users`, {
    method: 'POST',
    headers: { authorization: ctx.auth, 'content-type': 'application/json' },
    body: JSON.stringify({
      email: `check-${randomBytes(4).toString('hex')}@bench.example.com`,
      name: 'Bench',
    }),
  })
  const text = await res.text()
  if (res.status !== 201) throw new Error(`POST /users: expected 201, got ${res.status}: ${text}`)
}

/** Waits until the receiver has `n` deliveries; throws after `ms`. */
const awaitDeliveries = async (receiver: Receiver, n: number, ms: number): Promise<void> => {
  const until = performance.now() + ms
  while ((await receiver.count()) < n) {
    if (performance.now() > until) throw new Error(`no webhook delivery within ${ms} ms`)
    await sleep(20)
  }
}

/** A service with one endpoint at `receiver`, which has got the delivery of a first write. */
const hookedService = async (
  ctx: WebhookBenchContext,
  users: number,
  receiver: Receiver,
): Promise<BenchService & { hookId: string }> => {
  const service = await ctx.startService(users, WEBHOOK_ENV)
  return closingOnError(service.close, async () => {
    const hookId = await register(ctx, service.url, receiver.url)
    await createOne(ctx, service.url)
    await awaitDeliveries(receiver, 1, FIRST_DELIVERY_MS)
    await receiver.take()
    return { ...service, hookId }
  })
}

/**
 * POST /users on a fresh service with one endpoint that answers at once, against a fresh service
 * of the same size with none (both with the same settings). Before every wrk run, of either, the
 * endpoint's deliveries catch up: a backlog left by one run would take CPU from the next.
 */
export const webhookPostSetup = async (
  ctx: WebhookBenchContext,
  users: number,
): Promise<WebhookCaseSetup> => {
  const receiver = await startReceiver('count')
  const hooked = await closingOnError(receiver.close, () => hookedService(ctx, users, receiver))
  const plain = await closingOnError(
    async () => {
      await hooked.close()
      await receiver.close()
    },
    () => ctx.startService(users, WEBHOOK_ENV),
  )
  const close = async (): Promise<void> => {
    const delivered = await receiver.count().catch(() => 0)
    if (delivered > 0)
      ctx.log(
        `  receiver: ${delivered} deliveries, ${((receiver.cpuSeconds() * 1e6) / delivered).toFixed(0)} µs CPU each (the same cores as the service's)`,
      )
    await plain.close()
    await hooked.close()
    await receiver.close()
  }
  return closingOnError(close, async () => {
    await createOne(ctx, plain.url)
    const script = async (): Promise<string> => {
      await drain(ctx, hooked.url, hooked.hookId)
      return ctx.postScript()
    }
    return {
      service: { url: hooked.url, pid: hooked.pid, script },
      reference: { url: plain.url, pid: plain.pid, script },
      close,
    }
  })
}

/** One paced run, then the wait for its deliveries (until all came, or none for STALL_MS). */
const lagRun = async (
  ctx: WebhookBenchContext,
  service: BenchService,
  receiver: Receiver,
  seconds: number,
): Promise<WebhookLagRun> => {
  const written = await pacedWrites(service.url, ctx.auth, ctx.lagRate, seconds)
  const ended = performance.now()
  let seen = -1
  let lastChange = ended
  let lastDelivery = ended
  for (;;) {
    const now = performance.now()
    const got = await receiver.count()
    if (got !== seen) {
      seen = got
      lastChange = now
      lastDelivery = now
    }
    if (got >= written.ids.length || now - lastChange > STALL_MS) break
    await sleep(10)
  }
  const { lags, duplicates } = await receiver.take()
  const latencies: number[] = []
  for (const id of written.ids) {
    const lag = lags.get(id)
    if (lag !== undefined) latencies.push(lag)
  }
  return {
    rate: ctx.lagRate,
    sent: written.sent,
    acknowledged: written.ids.length,
    failed: written.failed,
    achievedRate: written.ids.length / written.seconds,
    delivered: latencies.length,
    missing: written.ids.length - latencies.length,
    duplicates,
    medianMs: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
    catchUpMs: lastDelivery - ended,
  }
}

const lagSummary = (r: WebhookLagRun): string =>
  `${r.acknowledged} of ${r.sent} writes acknowledged (${r.achievedRate.toFixed(0)}/s), ` +
  `${r.delivered} delivered, ${r.missing} missing, ${r.duplicates} duplicates; lag median ` +
  `${r.medianMs.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms; caught up ${r.catchUpMs.toFixed(0)} ms after the writes`

/**
 * Delivery lag at `lagRate` writes/s: one service with one endpoint, a warm-up run whose figures
 * are dropped, then `runs` paced runs of `durationS` seconds.
 */
export const webhookLagCase = async (
  ctx: WebhookBenchContext,
  users: number,
): Promise<WebhookLagResult> => {
  ctx.log(`\n== webhook delivery lag, ${ctx.lagRate} writes/s, one endpoint (${users} users)`)
  const receiver = await startReceiver('record')
  try {
    const service = await hookedService(ctx, users, receiver)
    try {
      ctx.log(`  warm-up: ${lagSummary(await lagRun(ctx, service, receiver, ctx.warmupS))}`)
      const runs: WebhookLagRun[] = []
      for (let run = 0; run < ctx.runs; run++) {
        const measured = await lagRun(ctx, service, receiver, ctx.durationS)
        runs.push(measured)
        ctx.log(`  run ${run + 1}/${ctx.runs} ${lagSummary(measured)}`)
      }
      return { runs }
    } finally {
      await service.close()
    }
  } finally {
    await receiver.close()
  }
}
