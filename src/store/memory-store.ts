import type { KeptKey } from '../domain/kept-key.js'
import { toRecord, type User } from '../domain/user.js'
import type { Durability, IndexedState } from './durability.js'
import { IndexedStore, type IndexedStoreOptions } from './indexed-store.js'
import { MemoryKeys } from './memory-keys.js'
import { MemoryWebhooks } from './memory-webhooks.js'
import type { StoreCapabilities } from './store.js'
import { checkStorableUser } from './store-input.js'

const CAPABILITIES: StoreCapabilities = Object.freeze({
  dataDir: undefined,
  durable: false,
  shared: false,
  turnsReadOnly: false,
})

/**
 * No durability at all: every change is committed as soon as it is asked for, and the events
 * stay in the journal in memory, and so do the kept keys and the webhooks. It only puts the starting users in the
 * index.
 */
function memoryOnly(users: readonly User[], now: () => number): Durability {
  const done = (): Promise<void> => Promise.resolve()
  const keys = new MemoryKeys(now)
  let sweeping: NodeJS.Timeout | undefined
  return {
    capabilities: CAPABILITIES,
    keys,
    webhooks: new MemoryWebhooks(),
    attach(state: IndexedState) {
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
      // Expired keys leave memory within a minute.
      sweeping ??= setInterval(() => {
        keys.sweep()
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
    logEvent(_event, kept?: KeptKey) {
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
  /** Optionally starts with some users; ids and emails (case-insensitive) must be unique. */
  constructor(users: readonly User[] = [], options: IndexedStoreOptions = {}) {
    super(memoryOnly(users, options.now ?? Date.now), options)
  }
}
