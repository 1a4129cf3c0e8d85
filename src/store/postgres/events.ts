import { ServiceError } from '../../domain/errors.js'
import { cursorValue, formatEventId } from '../../domain/event.js'
import type { EventFeed, EventPage, EventQuery } from '../event-feed.js'
import type { CommitStallWatch } from './commit-stall.js'
import { type Query, readEventPage } from './event-page.js'
import { EVENT_CHANNEL, NOTIFY_PAYLOAD } from './event-schema.js'
import { FeedTail } from './feed-tail.js'
import type { PoolClient } from './pg-types.js'

/** One try at a LISTEN connection: what gives it back once made (undefined: none was). */
interface ListenAttempt {
  release: Promise<(() => void) | undefined>
}

export interface EventFeedOptions {
  /** How often the database is asked for new events while anyone follows the feed (ms). */
  pollMs?: number | undefined
  /** Gives a connection of its own for LISTEN, held while anyone follows the feed. */
  listen?: (() => Promise<PoolClient>) | undefined
  /** Watches the commits that wait for the event counter. */
  stalls?: CommitStallWatch | undefined
}

/** How long after a lost LISTEN connection another is tried. */
const LISTEN_RETRY_MS = 1000

/** Events the follower reads at a time, and their most bytes. */
const TAIL_PAGE = 1000
const TAIL_PAGE_BYTES = 16 * 1024 * 1024

const HEAD_STATEMENT = {
  name: 'events_head',
  text: 'SELECT last_id::text AS head FROM event_counter',
  values: [],
}

/**
 * The feed read from the database, so that a stream on any replica sees what every replica
 * committed. One follower per process: woken by this process's own commits at once, by NOTIFY for
 * the commits of other replicas, and by a poll (every `pollMs`; the poll is the truth), it reads
 * the new events once, keeps the newest in memory (FeedTail) and wakes the streams, which take
 * their pages from there: N streams cost one read per commit, not N.
 */
export class PostgresEventFeed implements EventFeed {
  readonly #query: Query
  readonly #listen: (() => Promise<PoolClient>) | undefined
  /** The LISTEN connection being made or held, and the function that gives it back. */
  #listener: ListenAttempt | undefined
  #relisten: NodeJS.Timeout | undefined
  readonly #pollMs: number
  readonly #stalls: CommitStallWatch | undefined
  readonly #wakers = new Set<() => void>()
  #poll: NodeJS.Timeout | undefined
  #tail: FeedTail | undefined
  #checking = false
  #recheck = false
  /** The newest event id this process has seen committed; never lowered (seenHead). */
  #seen = 0n
  appended = 0

  constructor(query: Query, options: EventFeedOptions = {}) {
    this.#query = query
    this.#pollMs = options.pollMs ?? 200
    this.#listen = options.listen
    this.#stalls = options.stalls
  }

  /**
   * The newest event id this process's follower has seen committed. A counter below it means the
   * database was restored under this process: its next append numbers above it (appendEvents).
   */
  get seenHead(): bigint {
    return this.#seen
  }

  get stalledSeconds(): number {
    return this.#stalls?.stalledSeconds ?? 0
  }

  get stalls(): number {
    return this.#stalls?.stalls ?? 0
  }

  /**
   * A page of the feed (see readEventPage). A live stream's page comes from the events this
   * process's follower already read when they hold it whole.
   */
  read(query: EventQuery): Promise<EventPage> {
    if (query.live === true) {
      const page = this.#tail?.page(query)
      if (page !== undefined) return Promise.resolve(page)
    }
    return readEventPage(this.#query, query)
  }

  /** The counter's last id: each commit takes it last, so it never shows an uncommitted id. */
  async head(): Promise<string> {
    const result = await this.#query<{ head: string }>(HEAD_STATEMENT)
    const head = result.rows[0]?.head
    if (head === undefined) throw new Error('the event counter has no row')
    return formatEventId(BigInt(head))
  }

  subscribe(wake: () => void): () => void {
    this.#wakers.add(wake)
    if (this.#poll === undefined) {
      this.#poll = setInterval(() => {
        void this.#check()
      }, this.#pollMs)
      this.#poll.unref()
      this.#startListening()
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
    if (this.#poll !== undefined) void this.#check()
  }

  #wake(): void {
    for (const wake of this.#wakers) wake()
  }

  stop(): void {
    clearInterval(this.#poll)
    this.#poll = undefined
    clearTimeout(this.#relisten)
    this.#tail = undefined
    const listener = this.#listener
    this.#listener = undefined
    void listener?.release.then((release) => release?.())
  }

  #startListening(): void {
    if (this.#listen === undefined || this.#listener !== undefined) return
    const listen = this.#listen
    const attempt: ListenAttempt = { release: Promise.resolve(undefined) }
    this.#listener = attempt
    attempt.release = (async () => {
      let client: PoolClient
      try {
        client = await listen()
      } catch {
        this.#listenLost(attempt)
        return undefined
      }
      let released = false
      const release = (): void => {
        if (released) return
        released = true
        client.removeAllListeners('notification')
        // Dropped, not reused: the connection listens, or is broken.
        client.release(true)
      }
      // The schema this connection reads; until it is known, every notification wakes.
      let schema: string | undefined
      client.on('notification', ({ payload }) => {
        if (this.#poll === undefined) return
        // Another schema's commit is another service's on the same database; an empty payload
        // is a replica's older than this version, and wakes.
        if (schema !== undefined && payload !== undefined && payload !== '' && payload !== schema)
          return
        void this.#check()
      })
      // The server ended the connection (a restart, a failover): listen on a new one.
      const lost = (): void => {
        release()
        this.#listenLost(attempt)
      }
      client.on('error', lost)
      client.on('end', lost)
      try {
        const result = await client.query<{ schema: string }>(`SELECT ${NOTIFY_PAYLOAD} AS schema`)
        schema = result.rows[0]?.schema
        await client.query(`LISTEN ${EVENT_CHANNEL}`)
      } catch {
        lost()
        return undefined
      }
      return release
    })()
  }

  /**
   * The LISTEN connection could not be made, or was lost: meanwhile the poll alone finds new
   * events, and another is tried in a second while anyone follows the feed.
   */
  #listenLost(attempt: ListenAttempt): void {
    if (this.#listener !== attempt) return
    this.#listener = undefined
    if (this.#poll === undefined) return
    clearTimeout(this.#relisten)
    this.#relisten = setTimeout(() => {
      if (this.#poll !== undefined) this.#startListening()
    }, LISTEN_RETRY_MS)
    this.#relisten.unref()
  }

  /**
   * Deletes every event older than `cutoff` up to the newest such one, in one statement, and
   * moves the pruned bound there. Every event it sees is final (ids are taken in commit order), so
   * none commits below the bound afterwards.
   */
  async prune(cutoff: string): Promise<void> {
    await this.#query({
      name: 'events_prune',
      text: `WITH cut AS (SELECT max(id) AS through FROM events WHERE time < $1),
        gone AS (DELETE FROM events WHERE id <= (SELECT through FROM cut) RETURNING 1)
        UPDATE event_counter SET pruned_through = greatest(pruned_through, (SELECT through FROM cut))
        WHERE (SELECT through FROM cut) IS NOT NULL`,
      values: [cutoff],
    })
  }

  /**
   * Reads the events committed since the tail's head (the first time, only where the head is)
   * and wakes the followers when it moved. One check at a time; a wake-up during one runs another.
   */
  async #check(): Promise<void> {
    if (this.#checking) {
      this.#recheck = true
      return
    }
    this.#checking = true
    try {
      await this.#follow()
    } catch (error) {
      // A tail pruned past (a process that followed nothing new for the whole retention) starts
      // again at the head; the streams find out from the database. Anything else: the database is
      // away, the next poll tries again, and readiness says so meanwhile.
      if (error instanceof ServiceError && error.code === 'cursor_expired') {
        this.#tail = undefined
        this.#wake()
      }
    } finally {
      this.#checking = false
    }
    if (this.#recheck) {
      this.#recheck = false
      void this.#check()
    }
  }

  async #follow(): Promise<void> {
    const tail = this.#tail
    if (tail === undefined) {
      const result = await this.#query<{ head: string }>(HEAD_STATEMENT)
      const head = result.rows[0]?.head
      if (head === undefined || this.#poll === undefined) return
      this.#tail = new FeedTail(BigInt(head))
      this.#see(BigInt(head))
      this.#wake()
      return
    }
    for (;;) {
      const before = tail.head
      const page = await readEventPage(this.#query, {
        after: formatEventId(before),
        limit: TAIL_PAGE,
        maxBytes: TAIL_PAGE_BYTES,
      })
      if (this.#tail !== tail) return
      tail.extend(page.items, cursorValue(page.nextCursor))
      this.#see(tail.head)
      if (tail.head !== before) this.#wake()
      if (page.items.length < TAIL_PAGE) return
    }
  }

  #see(head: bigint): void {
    if (head > this.#seen) this.#seen = head
  }
}
