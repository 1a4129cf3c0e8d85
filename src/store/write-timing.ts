import { performance } from 'node:perf_hooks'

/** How long one durable write (failed ones included), or one fsync of it, took. */
export interface DurableWriteTiming {
  /**
   * `write`: a whole writeFile, from the temp file to the directory fsync (or to the rename, for a
   * file the write-ahead log covers); else one fsync: of a file, a directory, or the log's append.
   */
  readonly kind: 'write' | 'file-sync' | 'dir-sync' | 'log-sync'
  /** The directory written to. */
  readonly dir: string
  readonly seconds: number
}

/**
 * Told the duration of every durable write and fsync of the store it is given to (its options'
 * `timings`): the service's metrics implement it.
 */
export type DurableWriteObserver = (timing: DurableWriteTiming) => void

/** The observer of a store nobody measures. */
export const UNOBSERVED: DurableWriteObserver = () => undefined

/** Tells `observer` how long a durable write or fsync took (`started`: performance.now()). */
export function reportDurableWrite(
  observer: DurableWriteObserver,
  kind: DurableWriteTiming['kind'],
  dir: string,
  started: number,
): void {
  // Stryker disable next-line ConditionalExpression: without the early return the unobserved timing goes nowhere alike
  if (observer === UNOBSERVED) return
  try {
    observer({ kind, dir, seconds: (performance.now() - started) / 1000 })
  } catch {
    // Measuring must never fail a write.
  }
}
