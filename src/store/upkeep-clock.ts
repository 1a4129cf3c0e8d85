/**
 * The clock a store's upkeep deletes by (expired `Idempotency-Key` journals, events past the
 * retention). A wall clock stepped forward by mistake (an operator's wrong date, a bad NTP source,
 * a virtual machine resumed with a stale offset) and set right again a minute later would
 * otherwise delete, at once and for good, every kept key and every event it took for old. This
 * one follows the wall clock back at once, and forward only as fast as the monotonic clock runs,
 * unless the wall clock has stayed ahead for FORWARD_GRACE_MS: a step forward that lasts is
 * believed then (a clock that was behind and got corrected), one that is undone costs nothing.
 */

import { SETTINGS } from '../settings.js'

/** How long a wall clock must stay ahead of the monotonic reckoning before upkeep believes it. */
export const FORWARD_GRACE_MS = 10 * 60 * 1000
/** Less than this ahead is drift, not a step. */
const DRIFT_MS = 1000

/**
 * The upkeep clock of a store whose `now` is `now`: guarded when it is the real wall clock; a
 * clock an embedder or a test injected is its own (a test moves it forward on purpose).
 */
export function upkeepClock(now: (() => number) | undefined): () => number {
  return now === undefined || now === Date.now ? steadyClock(Date.now) : now
}

/** See the module comment; `monotonic` in ms (performance.now() by default). */
export function steadyClock(
  wall: () => number,
  monotonic: () => number = () => performance.now(),
): () => number {
  let at = wall()
  let seen = monotonic()
  let aheadSince: number | undefined
  return () => {
    const now = wall()
    const mono = monotonic()
    const reckoned = at + (mono - seen)
    seen = mono
    if (now <= reckoned + DRIFT_MS) {
      aheadSince = undefined
      at = now
    } else {
      aheadSince ??= mono
      at = mono - aheadSince >= FORWARD_GRACE_MS ? now : reckoned
    }
    return at
  }
}

/**
 * The time events before which are pruned, as an event's `time`: `days` of retention (the
 * setting's default when undefined) behind `nowMs`. Every store prunes by it.
 */
export function retentionCutoff(nowMs: number, days: number | undefined): string {
  return new Date(nowMs - (days ?? SETTINGS.eventsRetentionDays.default) * 86_400_000).toISOString()
}
