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
  runs: { service: Run[]; reference: Run[]; authReference: Run[] }
}

export interface StartResult {
  serviceMs: number[]
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
