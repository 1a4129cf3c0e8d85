import type { PoolClient } from 'pg'

import type { EventFeed, EventPage, EventQuery } from '../feed/journal.js'
import { type Query, readEventPage } from './event-page.js'
import { EVENT_CHANNEL, FINAL_BELOW, FINAL_HEAD } from './event-schema.js'

/**
 * The feed read from the database, so that a stream on any replica sees what every replica
 * committed. Followers are woken by this process's own commits at once, by NOTIFY for the commits
 * of other replicas, and by a poll of the newest final event (every `pollMs`): the poll is the
 * truth.
 */
export class PostgresEventFeed implements EventFeed {
  readonly #query: Query
  readonly #listen: (() => Promise<PoolClient>) | undefined
  #listener: Promise<PoolClient | undefined> | undefined
  readonly #pollMs: number
  readonly #wakers = new Set<() => void>()
  #poll: NodeJS.Timeout | undefined
  #head = ''
  #checking = false
  #recheck = false
  #soon: NodeJS.Timeout | undefined
  #pendingMs = 0
  appended = 0

  /** `listen` gives a connection of its own for LISTEN, held while anyone follows the feed. */
  constructor(query: Query, pollMs = 200, listen?: () => Promise<PoolClient>) {
    this.#query = query
    this.#pollMs = pollMs
    this.#listen = listen
  }

  /** A page of the feed (see readEventPage). */
  read(query: EventQuery): Promise<EventPage> {
    return readEventPage(this.#query, query)
  }

  subscribe(wake: () => void): () => void {
    this.#wakers.add(wake)
    if (this.#poll === undefined) {
      this.#poll = setInterval(() => {
        void this.#check()
      }, this.#pollMs)
      this.#poll.unref()
      this.#startListening()
      // Events committed while nobody followed may be waiting for an older transaction: without
      // a check now, nothing would look again before the poll (no commit, no NOTIFY is coming).
      void this.#check()
    }
    return () => {
      this.#wakers.delete(wake)
      if (this.#wakers.size === 0) this.stop()
    }
  }

  /** This process committed an event: its followers need not wait for the poll. */
  committed(): void {
    this.appended += 1
    this.#woken()
  }

  /** New events were committed: readable at once, unless an older transaction still runs. */
  #woken(): void {
    this.#wake()
    if (this.#poll !== undefined) void this.#check()
  }

  #wake(): void {
    for (const wake of this.#wakers) wake()
  }

  stop(): void {
    clearInterval(this.#poll)
    this.#poll = undefined
    clearTimeout(this.#soon)
    this.#soon = undefined
    const listener = this.#listener
    this.#listener = undefined
    void listener?.then((client) => {
      if (client === undefined) return
      client.removeAllListeners('notification')
      // Dropped, not reused: the connection still listens.
      client.release(true)
    })
  }

  #startListening(): void {
    if (this.#listen === undefined || this.#listener !== undefined) return
    const listen = this.#listen
    this.#listener = (async () => {
      try {
        const client = await listen()
        client.on('notification', () => {
          this.#woken()
        })
        client.on('error', () => undefined)
        await client.query(`LISTEN ${EVENT_CHANNEL}`)
        return client
      } catch {
        // No wake-ups: the poll alone finds new events.
        return undefined
      }
    })()
  }

  /**
   * Deletes every event up to the newest final one older than `cutoff`, in one statement: none
   * that is not final yet, so that no event commits below the pruned bound afterwards.
   */
  async prune(cutoff: string): Promise<void> {
    await this.#query({
      name: 'events_prune',
      text: `WITH cut AS (SELECT max(id) AS through FROM events, event_counter c WHERE time < $1 AND id < ${FINAL_BELOW}),
        gone AS (DELETE FROM events WHERE id <= (SELECT through FROM cut) RETURNING 1)
        UPDATE event_counter SET pruned_through = greatest(pruned_through, coalesce((SELECT through FROM cut), 0))
        WHERE (SELECT through FROM cut) IS NOT NULL`,
      values: [cutoff],
    })
  }

  /**
   * Asks for the newest final event (FINAL_HEAD) and wakes the followers when it moved. An event
   * committed but not yet final (an older transaction still runs: on any replica, or any other
   * writer of the cluster) has woken them too early: then the check comes again soon, sooner
   * than the poll, until it is final. One check at a time; a wake-up during one runs another.
   */
  async #check(): Promise<void> {
    if (this.#checking) {
      this.#recheck = true
      return
    }
    this.#checking = true
    let pending = false
    try {
      const result = await this.#query<{ head: string; pending: boolean }>({
        name: 'events_final_head',
        text: `SELECT ${FINAL_HEAD}::text AS head, EXISTS (SELECT 1 FROM events WHERE id >= ${FINAL_BELOW}) AS pending
          FROM event_counter c`,
        values: [],
      })
      const row = result.rows[0]
      pending = row?.pending ?? false
      const head = row?.head ?? ''
      if (head !== this.#head) {
        this.#head = head
        this.#pendingMs = 0
        this.#wake()
      }
    } catch {
      // The database is away: the next poll tries again, and readiness says so meanwhile.
    } finally {
      this.#checking = false
    }
    if (this.#recheck) {
      this.#recheck = false
      void this.#check()
    } else if (pending && this.#poll !== undefined) this.#checkSoon()
  }

  /** The next check after a short wait, doubled each time (up to the poll's) while events wait. */
  #checkSoon(): void {
    if (this.#soon !== undefined) return
    this.#pendingMs = Math.min(Math.max(this.#pendingMs * 2, 2), this.#pollMs)
    this.#soon = setTimeout(() => {
      this.#soon = undefined
      void this.#check()
    }, this.#pendingMs)
    this.#soon.unref()
  }
}
