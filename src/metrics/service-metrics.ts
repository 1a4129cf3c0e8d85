import path from 'node:path'
import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks'

import type { RouteSpec } from '../http/route-spec.js'
import { registerProcessMetrics } from './process-metrics.js'
import {
  type CounterChild,
  EXPOSITION_CONTENT_TYPE,
  type HistogramChild,
  Registry,
} from './registry.js'
import { registerWebhookMetrics, type WebhookCounts } from './webhook-metrics.js'

export { EXPOSITION_CONTENT_TYPE }

/** What the request listener tells the metrics: cheap calls, nothing allocated per request. */
export interface RequestMetrics {
  requestStarted(): void
  /** `route` undefined: no route matched (404, 405, or refused before routing). */
  requestFinished(
    route: RouteSpec | undefined,
    method: string | undefined,
    status: number,
    durationMs: number,
  ): void
}

export interface ServiceMetricsSources {
  routes: readonly RouteSpec[]
  /** Users stored now; undefined when the store cannot say cheaply. */
  usersStored: () => number | undefined
  tokenCache: () => { cached: number; cachedBytes: number; verifications: number }
  /** Log lines dropped so far; undefined when the logger does not count them. */
  droppedLogLines: () => number | undefined
  /** Only durable writes into directories under this one are measured (the file store's). */
  dataDir: string | undefined
  /** Events this process appended to the change feed; undefined: no feed. */
  eventsAppended?: (() => number | undefined) | undefined
  /** `GET /events` streams open now. */
  eventStreams?: (() => number) | undefined
  /** The feed's commits waiting past the stall threshold: the oldest one's wait and how many so far. */
  feedStalls?: (() => { seconds: number; total: number } | undefined) | undefined
  /** Webhook delivery's counts; undefined: no webhook families. */
  webhooks?: (() => WebhookCounts) | undefined
}

/**
 * How long one durable write of the store (failed ones included), or one fsync of it, took: what
 * the store tells its timings observer (store/write-timing.ts), which `storeWrite` is.
 */
export interface StoreWriteTiming {
  /** `write`: a whole file write; else one fsync of a file, a directory, or the log's append. */
  readonly kind: 'write' | 'file-sync' | 'dir-sync' | 'log-sync'
  /** The directory written to. */
  readonly dir: string
  readonly seconds: number
}

export interface ServiceMetrics extends RequestMetrics {
  /** Starts the event-loop delay monitor and the store timings; idempotent. */
  start(): void
  stop(): void
  /** Counts a store write's timing while started (the store's timings observer). */
  storeWrite(timing: StoreWriteTiming): void
  /** The exposition text of every family. */
  render(): string
}

/** The route label of requests no route took; every other value is a template of the table. */
export const UNMATCHED_ROUTE = 'unmatched'

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const
/** Methods outside the list share one label, so that a client cannot make new series at will. */
const OTHER_METHOD = 'other'

const REQUEST_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
]
const STORE_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
]
const LOOP_RESOLUTION_MS = 10

/** The counters and the histogram of one route label, found with one Map lookup per request. */
interface RouteInstruments {
  readonly route: string
  readonly duration: HistogramChild
  /** By `methodIndex * 1000 + status`: a number key, no string built per request. */
  readonly byMethodStatus: Map<number, CounterChild>
}

/** The metric families (docs/operations.md, metrics), wired to the service's parts. */
export function createServiceMetrics(sources: ServiceMetricsSources): ServiceMetrics {
  const registry = new Registry()
  const requests = registry.counter(
    'user_service_http_requests_total',
    'HTTP requests answered, by route template, method and status (499: the client went away first).',
    ['route', 'method', 'status'],
  )
  const durations = registry.histogram(
    'user_service_http_request_duration_seconds',
    'Time from the request line to the end of the answer, by route template.',
    REQUEST_BUCKETS,
    ['route'],
  )
  const inflight = registry
    .gauge('user_service_http_requests_in_flight', 'HTTP requests received and not yet answered.')
    .labels()
  const users = registry
    .gauge('user_service_users', 'Users stored (deleted users not counted).')
    .labels()
  const writes = registry
    .histogram(
      'user_service_store_write_seconds',
      'Durable writes of one file, from the temp file to the directory fsync, failed ones included.',
      STORE_BUCKETS,
    )
    .labels()
  const fsyncs = registry.histogram(
    'user_service_store_fsync_seconds',
    'Fsyncs of the store, by what was synced (log: the write-ahead log, one per batch of writers; file: a user file, by a checkpoint or a write without an event; directory: renames and unlinks, shared).',
    STORE_BUCKETS,
    ['target'],
  )
  const fileSyncs = fsyncs.labels('file')
  const dirSyncs = fsyncs.labels('directory')
  const logSyncs = fsyncs.labels('log')
  const loopDelay = registry.gauge(
    'user_service_event_loop_delay_seconds',
    'Event-loop delay since the previous scrape, by statistic (p50, p99, max).',
    ['stat'],
  )
  const dropped = registry
    .counter(
      'user_service_log_lines_dropped_total',
      'Log lines dropped because the reader could not keep up or the stream broke.',
    )
    .labels()
  const cacheEntries = registry
    .gauge('user_service_token_cache_entries', 'Verified tokens held in the cache.')
    .labels()
  const cacheBytes = registry
    .gauge('user_service_token_cache_bytes', 'Bytes of the tokens held in the cache.')
    .labels()
  const verifications = registry
    .counter('user_service_token_verifications_total', 'Token signatures verified (cache misses).')
    .labels()
  const appended = registry
    .counter(
      'user_service_events_appended_total',
      'Events this process appended to the change feed, one per change.',
    )
    .labels()
  const streams = registry
    .gauge('user_service_event_streams', 'GET /events streams (text/event-stream) open now.')
    .labels()
  const stalled = registry
    .gauge(
      'user_service_event_feed_stalled_seconds',
      'How long the oldest commit now waiting to append its events has waited, once past the stall threshold (PostgreSQL: another session holds the event counter); 0 otherwise.',
    )
    .labels()
  const stalls = registry
    .counter(
      'user_service_event_feed_stalls_total',
      'Commits that waited past the stall threshold to append their events.',
    )
    .labels()
  registerProcessMetrics(registry)
  if (sources.webhooks !== undefined) registerWebhookMetrics(registry, sources.webhooks)
  const byRoute = new Map<RouteSpec, RouteInstruments>()
  for (const route of sources.routes) {
    byRoute.set(route, instrumentsFor(route.path, durations.labels(route.path)))
  }
  const unmatched = instrumentsFor(UNMATCHED_ROUTE, durations.labels(UNMATCHED_ROUTE))

  const counterFor = (
    instruments: RouteInstruments,
    method: string | undefined,
    status: number,
  ): CounterChild => {
    const index = methodIndex(method)
    const key = index * 1000 + status
    let counter = instruments.byMethodStatus.get(key)
    if (counter === undefined) {
      counter = requests.labels(instruments.route, METHODS[index] ?? OTHER_METHOD, String(status))
      instruments.byMethodStatus.set(key, counter)
    }
    return counter
  }

  let loop: IntervalHistogram | undefined
  const storeDir = sources.dataDir === undefined ? undefined : path.resolve(sources.dataDir)
  const storeWrite = (timing: StoreWriteTiming): void => {
    if (loop === undefined || storeDir === undefined || !isInside(storeDir, timing.dir)) return
    if (timing.kind === 'write') writes.observe(timing.seconds)
    else if (timing.kind === 'file-sync') fileSyncs.observe(timing.seconds)
    else if (timing.kind === 'log-sync') logSyncs.observe(timing.seconds)
    else dirSyncs.observe(timing.seconds)
  }

  registry.onCollect(() => {
    users.set(sources.usersStored() ?? 0)
    appended.setTotal(sources.eventsAppended?.() ?? 0)
    streams.set(sources.eventStreams?.() ?? 0)
    const feedStalls = sources.feedStalls?.()
    stalled.set(feedStalls?.seconds ?? 0)
    stalls.setTotal(feedStalls?.total ?? 0)
    const droppedLines = sources.droppedLogLines()
    if (droppedLines !== undefined) dropped.setTotal(droppedLines)
    const cache = sources.tokenCache()
    cacheEntries.set(cache.cached)
    cacheBytes.set(cache.cachedBytes)
    verifications.setTotal(cache.verifications)
    if (loop !== undefined) {
      // Each sample is the whole wait of a timer of LOOP_RESOLUTION_MS: the excess is the delay.
      const excess = (nanoseconds: number): number =>
        Math.max(0, nanoseconds / 1e9 - LOOP_RESOLUTION_MS / 1000)
      const seen = loop.count > 0
      loopDelay.labels('p50').set(seen ? excess(loop.percentile(50)) : 0)
      loopDelay.labels('p99').set(seen ? excess(loop.percentile(99)) : 0)
      loopDelay.labels('max').set(seen ? excess(loop.max) : 0)
      loop.reset()
    }
  })

  return {
    requestStarted() {
      inflight.value += 1
    },
    requestFinished(route, method, status, durationMs) {
      inflight.value -= 1
      const instruments = (route === undefined ? undefined : byRoute.get(route)) ?? unmatched
      instruments.duration.observe(durationMs / 1000)
      counterFor(instruments, method, status).value += 1
    },
    start() {
      if (loop !== undefined) return
      loop = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS })
      loop.enable()
    },
    stop() {
      loop?.disable()
      loop = undefined
    },
    storeWrite,
    render: () => registry.render(),
  }
}

function instrumentsFor(route: string, duration: HistogramChild): RouteInstruments {
  return { route, duration, byMethodStatus: new Map() }
}

function methodIndex(method: string | undefined): number {
  switch (method) {
    case 'GET':
      return 0
    case 'HEAD':
      return 1
    case 'POST':
      return 2
    case 'PUT':
      return 3
    case 'PATCH':
      return 4
    case 'DELETE':
      return 5
    case 'OPTIONS':
      return 6
    default:
      return METHODS.length
  }
}

function isInside(dir: string, candidate: string): boolean {
  return candidate === dir || candidate.startsWith(`${dir}${path.sep}`)
}
