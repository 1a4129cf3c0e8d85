import type { PoolClient } from 'pg'

import type { EventFeed, EventPage, EventQuery } from '../feed/journal.js'
import { type Query, readEventPage } from './event-page.js'
import { EVENT_CHANNEL } from './event-schema.js'

/**
 * The feed read from the database, so that a stream on any replica sees what every replica
 * committed. Followers are woken by this process's own commits at once, and by a poll of the
 * counter (every `pollMs`) for the commits of other replicas: the poll is the truth.
 */
export class PostgresEventFeed implements EventFeed {
  readonly #query: Query
  readonly #listen: (() => Promise<PoolClient>) | undefined
  #listener: Promise<PoolClient | undefined> | undefined
  readonly #pollMs: number
  readonly #wakers = new Set<() => void>()
  #poll: NodeJS.Timeout | undefined
  #head = ''
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
    }
    return () => {
      this.#wakers.delete(wake)
      if (this.#wakers.size === 0) this.stop()
    }
  }

  /** This process committed an event: its followers need not wait for the poll. */
  committed(): void {
    this.appended += 1
    this.#wake()
  }

  #wake(): void {
    for (const wake of this.#wakers) wake()
  }

  stop(): void {
    clearInterval(this.#poll)
    this.#poll = undefined
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
          this.#wake()
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

  /** Deletes every event up to the newest one older than `cutoff`, in one statement. */
  async prune(cutoff: string): Promise<void> {
    await this.#query({
      name: 'events_prune',
      text: `WITH cut AS (SELECT max(id) AS through FROM events WHERE time < $1),
        gone AS (DELETE FROM events WHERE id <= (SELECT through FROM cut) RETURNING 1)
        UPDATE event_counter SET pruned_through = greatest(pruned_through, coalesce((SELECT through FROM cut), 0))
        WHERE (SELECT through FROM cut) IS NOT NULL`,
      values: [cutoff],
    })
  }

  async #check(): Promise<void> {
    try {
      const result = await this.#query<{ head: string }>({
        name: 'events_head',
        text: 'SELECT last_id::text AS head FROM event_counter',
        values: [],
      })
      const head = result.rows[0]?.head ?? ''
      if (head === this.#head) return
      this.#head = head
      this.#wake()
    } catch {
      // The database is away: the next poll tries again, and readiness says so meanwhile.
    }
  }
}
