import type { Tombstone } from '../domain/tombstone.js'
import { toRecord, type User, type UserRecord } from '../domain/user.js'
import { IndexedStore, type IndexedStoreOptions } from './indexed-store.js'
import type { StoreCapabilities } from './store.js'
import { checkStorableUser } from './store-input.js'

/** A store that keeps users in memory only: for tests, and for embedding without a disk. */
export class MemoryStore extends IndexedStore {
  readonly capabilities: StoreCapabilities = Object.freeze({
    dataDir: undefined,
    durable: false,
    shared: false,
    turnsReadOnly: false,
  })

  /** Optionally starts with some users; ids and emails (case-insensitive) must be unique. */
  constructor(users: readonly User[] = [], options: IndexedStoreOptions = {}) {
    super(options)
    for (const user of users) {
      checkStorableUser(user, undefined)
      const record = toRecord(user)
      if (
        this.index.get(user.id) !== undefined ||
        this.index.idOfEmail(record.emailKey) !== undefined
      ) {
        throw new Error(`MemoryStore: user ${user.id} repeats an id or an email`)
      }
      this.index.put(record)
    }
  }

  open(): Promise<void> {
    return Promise.resolve()
  }

  close(): Promise<void> {
    return Promise.resolve()
  }

  protected persist(_record: UserRecord): Promise<void> {
    return Promise.resolve()
  }

  protected bury(_tombstone: Tombstone): Promise<void> {
    return Promise.resolve()
  }
}
