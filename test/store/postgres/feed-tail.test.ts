import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import pg from 'pg'

import type { EventType } from '../../../src/domain/event.js'
import type { EventPage, EventQuery } from '../../../src/store/event-feed.js'
import { PostgresStore } from '../../../src/store/postgres/postgres-store.js'
import { sleep } from '../../helpers/child.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../../helpers/postgres.js'
import { changeUser, makeUser } from '../../helpers/store-users.js'

/**
 * The pages a live stream takes from its process's follower (the events it holds in memory) are
 * the pages the database gives for the same query: same events, and a `nextCursor` from which
 * the same events follow, with every filter, limit and byte bound, and without a statement.
 */

/** The pg module with a Pool that counts every statement its connections run. */
function countingPg(counter: { statements: number }) {
  class CountingPool extends pg.Pool {
    constructor(config?: pg.PoolConfig) {
      super(config)
      this.on('connect', (client) => {
        const query = client.query.bind(client) as (...args: unknown[]) => unknown
        Object.assign(client, {
          query: (...args: unknown[]) => {
            counter.statements += 1
            return query(...args)
          },
        })
      })
    }
  }
  return { Pool: CountingPool }
}

describe('the PostgreSQL feed held in memory for live streams', { skip: SKIP_POSTGRES }, () => {
  it('answers a live page exactly as the database does, without a statement', {
    timeout: 120_000,
  }, async (t) => {
    const counter = { statements: 0 }
    const store = new PostgresStore({
      url: requireDatabaseUrl(),
      schema: freshSchema(t),
      eventPollMs: 50,
      probeIntervalMs: 600_000,
      pg: countingPg(counter) as unknown as typeof pg,
    })
    t.after(() => store.close())
    await store.open()
    let wakes = 0
    const unsubscribe = store.events.subscribe(() => {
      wakes += 1
    })
    t.after(unsubscribe)
    await sleep(200)
    const start = (await store.events.read({ limit: 1 })).nextCursor
    const ids: string[] = []
    for (let i = 0; i < 12; i += 1) {
      // Some events far larger than others, so that byte bounds cut pages in different places.
      const metadata = i % 4 === 0 ? { blob: 'x'.repeat(6000 + i) } : { n: String(i) }
      const user = (await store.create(makeUser({ metadata }))).user
      ids.push(user.id)
      if (i % 2 === 0)
        await store.update(user.id, (current) => changeUser(current.user, { name: `N${i}` }))
      if (i % 3 === 0) await store.delete(user.id)
    }
    const whole = await store.events.read({ after: start, limit: 1000 })
    assert.ok(whole.items.length >= 20)
    // The follower has read them all once the head it wakes for stops moving.
    await sleep(500)
    assert.ok(wakes > 0)
    const cursors = [start, ...whole.items.map((event) => event.id)]
    const filters: Partial<EventQuery>[] = [
      {},
      { types: ['user.updated'] as EventType[] },
      { types: ['user.created', 'user.deleted'] as EventType[] },
      { userId: ids[0] },
      { userId: ids[5], types: ['user.created'] as EventType[] },
    ]
    const queries: EventQuery[] = []
    for (const after of cursors)
      for (const filter of filters)
        for (const limit of [1, 3, 200])
          for (const maxBytes of [1, 7000, 1024 * 1024])
            queries.push({ after, limit, maxBytes, ...filter })
    const live: EventPage[] = []
    const before = counter.statements
    for (const query of queries) live.push(await store.events.read({ ...query, live: true }))
    assert.equal(counter.statements - before, 0, 'live pages ran no statement')
    for (const [i, query] of queries.entries()) {
      const stored = await store.events.read(query)
      const held = live[i]
      const what = JSON.stringify(query)
      assert.deepEqual(held?.items, stored.items, what)
      if (held?.nextCursor === stored.nextCursor) continue
      // A filtered page cut by bytes may resume just before the match it left out, or after its
      // last event, as the database's estimate of the sizes fell: no match lies between the two.
      assert.ok(query.types !== undefined || query.userId !== undefined, what)
      const fromHeld = await store.events.read({ ...query, after: held?.nextCursor })
      const fromStored = await store.events.read({ ...query, after: stored.nextCursor })
      assert.deepEqual(fromHeld.items, fromStored.items, what)
    }
  })
})
