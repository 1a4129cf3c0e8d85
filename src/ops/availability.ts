import { access } from 'node:fs/promises'
import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks'

import { HttpError, toHttpError } from '../http/problem.js'
import { storageUnavailable } from '../store/storage-unavailable.js'
import type { StoreHealth } from '../store/store.js'

export interface AvailabilityOptions {
  /** While this file exists the service is in maintenance; undefined: never. */
  maintenanceFile?: string | undefined
  maxInflight: number
  maxEventLoopDelayMs: number
  /** How often the maintenance file and the event-loop delay are looked at (default 1000 ms). */
  checkIntervalMs?: number
  /** The store's condition: readiness follows it, and a read-only store refuses writes at once. */
  storeHealth?: (() => StoreHealth) | undefined
}

type Phase = 'starting' | 'ready' | 'stopping'

/**
 * What a refusal is asked for: a request that reads, one that writes, the readiness probe, or the
 * export, a read that is served in maintenance too (it is how a backup or a migration is taken).
 */
export type Intent = 'read' | 'write' | 'readiness' | 'export'

const SAMPLE_MS = 20

/**
 * Whether the service takes traffic: starting, maintenance, overload (requests in flight, event
 * loop delay) and shutdown. The checks run on a timer, so a refusal costs a few comparisons.
 */
export class Availability {
  readonly #options: AvailabilityOptions
  #phase: Phase = 'starting'
  #maintenance = false
  #lagging = false
  #inflight = 0
  #timer: NodeJS.Timeout | undefined
  #histogram: IntervalHistogram | undefined

  constructor(options: AvailabilityOptions) {
    this.#options = options
  }

  get inflight(): number {
    return this.#inflight
  }

  get phase(): Phase {
    return this.#phase
  }

  /** Whether the maintenance file was there at the last look. */
  get inMaintenance(): boolean {
    return this.#maintenance
  }

  /** Starts the periodic checks (timers that do not keep the process alive). */
  start(): void {
    if (this.#timer !== undefined) return
    this.#histogram = monitorEventLoopDelay({ resolution: SAMPLE_MS })
    this.#histogram.enable()
    this.#timer = setInterval(() => {
      void this.#check()
    }, this.#options.checkIntervalMs ?? 1000)
    this.#timer.unref()
    void this.#check()
  }

  stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
    this.#histogram?.disable()
  }

  markReady(): void {
    if (this.#phase === 'starting') this.#phase = 'ready'
  }

  beginShutdown(): void {
    this.#phase = 'stopping'
  }

  enter(): void {
    this.#inflight += 1
  }

  leave(): void {
    this.#inflight -= 1
  }

  /**
   * Why a request must be refused with a 503 now, or undefined to serve it. A request that has
   * entered counts itself; readiness asks whether one more request would be taken, and whether
   * the store takes writes.
   */
  refusal(intent: Intent = 'read'): HttpError | undefined {
    const inflight = this.#inflight + (intent === 'readiness' ? 1 : 0)
    if (this.#phase === 'stopping') return shuttingDown()
    if (this.#phase === 'starting')
      return unavailable('starting', 'The service is loading its data.', 1)
    if (this.#maintenance && intent !== 'export') return maintenance()
    if (inflight > this.#options.maxInflight) {
      return unavailable('overloaded', 'Too many requests are in flight.', 1)
    }
    if (this.#lagging)
      return unavailable('overloaded', 'The service is too busy to answer in time.', 1)
    if (intent === 'read' || intent === 'export') return undefined
    const store = this.#options.storeHealth?.()
    if (store === undefined || store.state === 'ok') return undefined
    if (intent === 'readiness' || store.state === 'read_only')
      return toHttpError(storageUnavailable(undefined, store))
    return undefined
  }

  /**
   * Whether the service's own background writes (webhook deliveries, which write cursors and
   * logs) wait: while it starts or stops, in maintenance, or with its store read-only.
   */
  backgroundPaused(): boolean {
    return (
      this.#phase !== 'ready' ||
      this.#maintenance ||
      this.#options.storeHealth?.().state === 'read_only'
    )
  }

  /** Whether the store says it is `ok` (always, for a store that does not say). */
  storeHealthy(): boolean {
    return (this.#options.storeHealth?.().state ?? 'ok') === 'ok'
  }

  /**
   * Throws 503 maintenance once maintenance has been noticed: the store calls it at the moment a
   * change would be written, so that a write begun before maintenance does not reach the disk.
   */
  readonly writeGate = (): void => {
    if (this.#maintenance) throw maintenance()
  }

  async #check(): Promise<void> {
    const histogram = this.#histogram
    if (histogram !== undefined) {
      // The histogram measures each sampling timer's whole wait, so an idle loop reads SAMPLE_MS.
      const delayMs = histogram.percentile(99) / 1e6 - SAMPLE_MS
      this.#lagging = delayMs > this.#options.maxEventLoopDelayMs
      histogram.reset()
    }
    const file = this.#options.maintenanceFile
    if (file === undefined) return
    this.#maintenance = await access(file).then(
      () => true,
      () => false,
    )
  }
}

/** The refusal of a service that stops; also of an event stream whose checks began before. */
export function shuttingDown(): HttpError {
  return unavailable('shutting_down', 'The service is shutting down.', 5)
}

function maintenance(): HttpError {
  return unavailable('maintenance', 'The service is in maintenance.', 30)
}

function unavailable(
  code: 'shutting_down' | 'starting' | 'maintenance' | 'overloaded',
  detail: string,
  retryAfterS: number,
): HttpError {
  return new HttpError(code, detail, { headers: { 'retry-after': String(retryAfterS) } })
}
