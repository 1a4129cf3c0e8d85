import type { User, UserRecord } from '../users/user.js'
import { IndexedStore } from './indexed-store.js'

/** A store that keeps users in memory only: for tests, and for embedding without a disk. */
export class MemoryStore extends IndexedStore {
  /** Optionally starts with some users (they must have unique ids and emails). */
  constructor(users: readonly User[] = []) {
    super()
    for (const user of users) void this.create(user)
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

  protected unpersist(_id: string): Promise<void> {
    return Promise.resolve()
  }
}
