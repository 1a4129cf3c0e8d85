import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { MemoryStore } from '../../src/store/memory-store.js'
import { describeStoreContract, listAll } from '../helpers/store-suite.js'
import { makeUser } from '../helpers/store-users.js'

describeStoreContract('MemoryStore', () => Promise.resolve(new MemoryStore()))

describe('MemoryStore: seed users', () => {
  it('holds the users given to the constructor once open() resolves', async () => {
    const users = [makeUser(), makeUser(), makeUser()]
    const store = new MemoryStore(users)
    await store.open()
    assert.deepEqual(
      (await listAll(store)).map((record) => record.user),
      users,
    )
    assert.deepEqual((await store.get(users[0]?.id ?? ''))?.user, users[0])
  })

  it('holds the seeded users once pending work has settled', async () => {
    const users = [makeUser(), makeUser()]
    const store = new MemoryStore(users)
    await store.open()
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(
      (await listAll(store)).map((record) => record.user),
      users,
    )
    await store.close()
  })

  it('forgets everything when a new store is made (nothing is durable)', async () => {
    const first = new MemoryStore()
    await first.open()
    await first.create(makeUser())
    await first.close()
    const second = new MemoryStore()
    await second.open()
    assert.deepEqual(await listAll(second), [])
  })
})
