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

export type DurableWriteObserver = (timing: DurableWriteTiming) => void

// Module-wide so that the store needs no hook of its own; observers filter on `dir`.
const observers = new Set<DurableWriteObserver>()

/** Tells `observer` the duration of every durable write and fsync from now on; returns the way out. */
export function observeDurableWrites(observer: DurableWriteObserver): () => void {
  observers.add(observer)
  return () => {
    observers.delete(observer)
  }
}

/** Tells every observer how long a durable write or fsync took (`started`: performance.now()). */
export function reportDurableWrite(
  kind: DurableWriteTiming['kind'],
  dir: string,
  started: number,
): void {
  // Stryker disable next-line ConditionalExpression: without the early return the loop over no observers does nothing alike
  if (observers.size === 0) return
  const timing = { kind, dir, seconds: (performance.now() - started) / 1000 }
  for (const observer of observers) {
    try {
      observer(timing)
    } catch {
      // Measuring must never fail a write.
    }
  }
}
