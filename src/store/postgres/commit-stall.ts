import type { Logger } from '../../log/logger.js'

/** A session that holds what a waiting commit needs, as pg_stat_activity tells it. */
export interface Blocker {
  readonly pid: number
  /** Seconds since its transaction began; null when the database does not tell this role. */
  readonly transactionAgeSeconds: number | null
  readonly state: string | null
  readonly application: string | null
}

/** The sessions blocking the backend `pid` (pg_blocking_pids), oldest transaction first. */
export type FindBlockers = (pid: number) => Promise<readonly Blocker[]>

export const BLOCKERS_SQL = `SELECT a.pid, extract(epoch FROM now() - a.xact_start)::float8 AS age,
    a.state, a.application_name AS application
  FROM pg_stat_activity a WHERE a.pid = ANY (pg_blocking_pids($1::int)) ORDER BY a.xact_start NULLS LAST`

/**
 * Watches the tails of the transactions that append events (the counter statement and COMMIT):
 * the counter row is taken by one transaction at a time, so a session that holds it and does not
 * end (a frozen replica, someone's `SELECT … FOR UPDATE`) stops the feed and every write with
 * it. A tail that waits longer than `thresholdMs` is counted, shown by `stalledSeconds`, and
 * logged at warn with the blocking session's pid and age when the database tells them (at most
 * one line per threshold, however many writers wait).
 */
export class CommitStallWatch {
  readonly #thresholdMs: number
  readonly #logger: Logger
  readonly #findBlockers: FindBlockers
  readonly #waiting = new Set<{ readonly since: number }>()
  #lastWarning = Number.NEGATIVE_INFINITY
  /** Tails that waited past the threshold since the start. */
  stalls = 0

  constructor(thresholdMs: number, logger: Logger, findBlockers: FindBlockers) {
    this.#thresholdMs = thresholdMs
    this.#logger = logger
    this.#findBlockers = findBlockers
  }

  /** How long the oldest tail now waiting has waited, in seconds, once past the threshold; else 0. */
  get stalledSeconds(): number {
    let oldest = Number.POSITIVE_INFINITY
    for (const entry of this.#waiting) oldest = Math.min(oldest, entry.since)
    const waited = Date.now() - oldest
    return waited >= this.#thresholdMs ? waited / 1000 : 0
  }

  /** Runs a transaction's tail on the backend `pid`, reporting it if it waits too long. */
  async watch<T>(pid: number | undefined, tail: () => Promise<T>): Promise<T> {
    const entry = { since: Date.now() }
    this.#waiting.add(entry)
    const timer = setTimeout(() => {
      this.stalls += 1
      void this.#report(pid, entry.since)
    }, this.#thresholdMs)
    timer.unref()
    try {
      return await tail()
    } finally {
      clearTimeout(timer)
      this.#waiting.delete(entry)
    }
  }

  async #report(pid: number | undefined, since: number): Promise<void> {
    const now = Date.now()
    if (now - this.#lastWarning < this.#thresholdMs) return
    this.#lastWarning = now
    let blockers: readonly Blocker[] = []
    try {
      if (pid !== undefined) blockers = await this.#findBlockers(pid)
    } catch {
      // The database did not say: the line goes out without the blocker.
    }
    const first = blockers[0]
    this.#logger.warn('the change feed cannot advance: a commit waits for the event counter', {
      waitedMs: Date.now() - since,
      waitingPid: pid ?? null,
      blockingPid: first?.pid ?? null,
      blockingTransactionAgeS:
        first?.transactionAgeSeconds === null || first === undefined
          ? null
          : Math.round(first.transactionAgeSeconds * 1000) / 1000,
      blockingState: first?.state ?? null,
      blockingApplication: first?.application ?? null,
      blockers: blockers.length,
    })
  }
}
