import type { User } from '../../src/domain/user.js'
import { createIdGenerator } from '../../src/domain/uuid7.js'
import type { Store } from '../../src/store/store.js'

/**
 * Users for store tests, built the way the service builds them (UUIDv7 ids, so a later user has a
 * greater id). No node:test import here: the crash writer child process uses it too.
 */
const nextId = createIdGenerator()
let counter = 0

/** A valid version-1 user with a unique id, email and name; `fields` override any of them. */
export function makeUser(fields: Partial<User> = {}): User {
  counter += 1
  const { id, ms } = nextId(Date.now())
  const at = new Date(ms).toISOString()
  const tag = `${process.pid}.${counter}.${Math.random().toString(36).slice(2, 8)}`
  return {
    id,
    email: `user.${tag}@example.com`,
    name: `User ${tag}`,
    status: 'pending',
    metadata: {},
    createdAt: at,
    updatedAt: at,
    version: 1,
    ...fields,
  }
}

/** The next version of `current` with `fields` changed, as an update would make it. */
export function changeUser(current: User, fields: Partial<User> = {}): User {
  return {
    ...current,
    ...fields,
    version: current.version + 1,
    updatedAt: new Date().toISOString(),
  }
}

/** The contract's JSON of a user: its fields in the order of the contract's example. */
export function toContractJson(user: User): string {
  const { id, email, name, status, metadata, createdAt, updatedAt, version } = user
  return JSON.stringify({ id, email, name, status, metadata, createdAt, updatedAt, version })
}

/** The ids of every user of the store, in id order, page by page. */
export async function allUserIds(store: Store): Promise<string[]> {
  const ids: string[] = []
  let after: string | undefined
  for (;;) {
    const page = await store.list({
      filter: {},
      order: 'asc',
      limit: 100,
      ...(after === undefined ? {} : { after }),
    })
    ids.push(...page.items.map((record) => record.user.id))
    if (!page.hasMore) return ids
    after = ids.at(-1)
  }
}
