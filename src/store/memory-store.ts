import { eventIdNumber } from '../domain/event.js'
import type { KeptKey } from '../domain/kept-key.js'
import { toRecord, type User } from '../domain/user.js'
import type { Durability, IndexedState } from './durability.js'
import { IndexedStore, type IndexedStoreOptions } from './indexed-store.js'
import { MemoryKeys } from './memory-keys.js'
import { MemoryWebhooks } from './memory-webhooks.js'
import type { StoreCapabilities } from './store.js'
import { checkStorableUser } from './store-input.js'
import { retentionCutoff } from './upkeep-clock.js'

const CAPABILITIES: StoreCapabilities = Object.freeze({
  dataDir: undefined,
  durable: false,
  shared: false,
  turnsReadOnly: false,
})

export interface MemoryStoreOptions extends IndexedStoreOptions {
  /** Events older than this many days are dropped (default 30), as the other stores prune. */
  eventsRetentionDays?: number | undefined
}

/**
 * No durability at all: every change is committed as soon as it is asked for, and the events
 * stay in the journal in memory, and so do the kept keys and the webhooks. It only puts the starting users in the
 * index. Events past the retention leave the journal, or it would grow with every change made.
 */
function memoryOnly(
  users: readonly User[],
  now: () => number,
  retentionDays: number | undefined,
): Durability & { pruneEvents(): void } {
  const done = (): Promise<void> => Promise.resolve()
  const keys = new MemoryKeys(now)
  let sweeping: NodeJS.Timeout | undefined
  let attached: IndexedState | undefined
  /** Each logged event's id and time, oldest first: what a prune needs of the journal. */
  const logged: { id: number; time: string }[] = []
  const pruneEvents = (): void => {
    const cutoff = retentionCutoff(now(), retentionDays)
    let count = 0
    while (count < logged.length && (logged[count]?.time ?? cutoff) < cutoff) count += 1
    const last = logged[count - 1]
    if (last === undefined) return
    logged.splice(0, count)
    attached?.events.dropThrough(last.id)
  }
  return {
    pruneEvents,
    capabilities: CAPABILITIES,
    keys,
    webhooks: new MemoryWebhooks(),
    attach(state: IndexedState) {
      attached = state
      for (const user of users) {
        checkStorableUser(user, undefined)
        const record = toRecord(user)
        if (
          state.index.get(user.id) !== undefined ||
          state.index.idOfEmail(record.emailKey) !== undefined
        ) {
          throw new Error(`MemoryStore: user ${user.id} repeats an id or an email`)
        }
        state.index.put(record)
      }
    },
    lock() {
      // Nothing to claim.
    },
    open() {
      // Expired keys leave memory within a minute; old events too.
      sweeping ??= setInterval(() => {
        keys.sweep()
        pruneEvents()
      }, 30_000).unref()
      return done()
    },
    close() {
      clearInterval(sweeping)
      sweeping = undefined
      return done()
    },
    persist: done,
    bury: done,
    logEvent(event, kept?: KeptKey) {
      logged.push({ id: eventIdNumber(event.id), time: event.time })
      if (kept !== undefined) keys.put(kept)
      return done()
    },
    voidEvent: done,
    unwritten() {
      // Nothing on disk to tell about.
    },
  }
}

/** A store that keeps users in memory only: for tests, and for embedding without a disk. */
export class MemoryStore extends IndexedStore {
  readonly #prune: () => void

  /** Optionally starts with some users; ids and emails (case-insensitive) must be unique. */
  constructor(users: readonly User[] = [], options: MemoryStoreOptions = {}) {
    const durability = memoryOnly(users, options.now ?? Date.now, options.eventsRetentionDays)
    super(durability, options)
    this.#prune = durability.pruneEvents
  }

  /** Drops the events older than the retention now (a timer does it every 30 s). */
  pruneEvents(): Promise<void> {
    this.#prune()
    return Promise.resolve()
  }
}
