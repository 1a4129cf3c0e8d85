// What the bench's cases measure, shared by run.ts (which measures) and rows.ts (which judges).
import type { LiveResult } from './live-events.js'
import type { WrkResult } from './wrk.js'

export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  const hi = sorted[mid] ?? Number.NaN
  if (sorted.length % 2 === 1) return hi
  return ((sorted[mid - 1] ?? Number.NaN) + hi) / 2
}

export interface StartSample {
  users: number
  startMs: number
  rssMb: number
}

/** One wrk run and the CPU the server used for it. */
export interface Run extends WrkResult {
  /** Server CPU time (user + system) per request, in µs. */
  cpuUsPerReq: number
}

export interface Summary {
  rps: number
  cpuUsPerReq: number
  p50Ms: number
  p99Ms: number
  errors: number
}

export interface CaseResult {
  key: string
  label: string
  users: number
  service: Summary
  reference: Summary
  ratio: number
  authReference?: Summary
  /** service rps / auth reference rps. */
  authRatio?: number
  /** GET /users/{id} only: fastify 5 + @fastify/jwt + the same Map, logging at info and off. */
  fastifyReference?: Summary
  fastifyQuietReference?: Summary
  runs: {
    service: Run[]
    reference: Run[]
    authReference: Run[]
    fastifyReference: Run[]
    fastifyQuietReference: Run[]
  }
}

export interface StartResult {
  users: number
  /** Spawn to /readyz 200 from the snapshot the clean stop before wrote, per run. */
  serviceMs: number[]
  /** The same start without a snapshot (a first start, or one after a crash): every file read. */
  filesMs: number[]
  /** SIGTERM to exit of the stop after the files-only start (it writes the snapshot). */
  stopMs: number[]
  referenceMs: number[]
}

export interface ImportResult {
  /** users/s created, per run. */
  service: number[]
  /** raw durable files/s, per run. */
  reference: number[]
  /** Lines not answered 201, over every run. */
  failed: number
}

export interface LiveCaseResult {
  service: LiveResult[]
  reference: LiveResult[]
}

/** What a case gave: its result, or why there is none. */
export type Outcome<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly why: string }

export const NOT_SELECTED = 'not run (BENCH_ONLY)'

/** One paced run of the webhook lag case: the writes, and what the receiver got of them. */
export interface WebhookLagRun {
  /** Writes per second asked for. */
  rate: number
  sent: number
  /** Writes answered 201. */
  acknowledged: number
  /** Writes answered otherwise, or not at all. */
  failed: number
  /** Acknowledged writes per second, first request to last answer. */
  achievedRate: number
  /** Acknowledged writes whose event reached the receiver. */
  delivered: number
  /** Acknowledged writes whose event never reached it (after the catch-up wait). */
  missing: number
  /** Deliveries of an event already delivered (the same webhook-id). */
  duplicates: number
  /** Arrival at the receiver minus the event's time, ms: median and p99 over the run's events. */
  medianMs: number
  p99Ms: number
  /** From the writer's end to the last delivery, ms. */
  catchUpMs: number
}

export interface WebhookLagResult {
  runs: WebhookLagRun[]
}
