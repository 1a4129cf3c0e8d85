import assert from 'node:assert/strict'
import { performance } from 'node:perf_hooks'
import { describe, it } from 'node:test'

import { toRecord } from '../../src/domain/user.js'
import { type IdCursor, SortedIds } from '../../src/store/sorted-ids.js'
import { UserIndex } from '../../src/store/user-index.js'
import { makeUser } from '../helpers/store-users.js'

const id = (n: number): string => `id-${String(n).padStart(8, '0')}`

function drain(cursor: IdCursor): string[] {
  const out: string[] = []
  for (let next = cursor.peek(); next !== undefined; next = cursor.peek()) {
    out.push(next)
    cursor.advance()
  }
  return out
}

describe('SortedIds', () => {
  it('holds ids in order across many chunks, whatever order they come and go in', () => {
    const ids = new SortedIds()
    const model = new Set<string>()
    // A fixed walk over 6,000 ids (several chunks), putting and taking them out of order.
    for (let step = 0; step < 12_000; step += 1) {
      const n = (step * 7919) % 6000
      const one = id(n)
      if (step % 5 === 4 && model.has(one)) {
        ids.remove(one)
        model.delete(one)
      } else if (!model.has(one)) {
        ids.insert(one)
        model.add(one)
      }
    }
    ids.remove(id(99_999))
    const sorted = [...model].sort()
    assert.deepEqual([...ids.ids()], sorted)
    assert.deepEqual(drain(ids.cursor('asc', undefined)), sorted)
    assert.deepEqual(drain(ids.cursor('desc', undefined)), [...sorted].reverse())
    for (const after of [id(0), id(1500), id(1501), id(4096), id(5999), 'a', 'z', sorted[1024]]) {
      const key = after ?? ''
      assert.deepEqual(
        drain(ids.cursor('asc', key)),
        sorted.filter((one) => one > key),
        `asc after ${key}`,
      )
      assert.deepEqual(
        drain(ids.cursor('desc', key)),
        sorted.filter((one) => one < key).reverse(),
        `desc after ${key}`,
      )
    }
  })

  it('walks nothing when empty', () => {
    const ids = new SortedIds()
    assert.equal(ids.cursor('asc', undefined).peek(), undefined)
    assert.equal(ids.cursor('desc', 'x').peek(), undefined)
  })
})

describe('UserIndex: users put newest first', () => {
  // One sorted array moved every later id on each put: 200,000 of them took tens of seconds,
  // which is what an import of exported users, newest first, did to the service.
  it('takes 200,000 of them in about linear time', { timeout: 120_000 }, () => {
    const count = 200_000
    // makeUser's ids ascend: reversed, each put lands ahead of every id already held.
    const records = Array.from({ length: count }, () => toRecord(makeUser())).reverse()
    const index = new UserIndex()
    const started = performance.now()
    for (const record of records) index.put(record)
    const ms = performance.now() - started
    assert.equal(index.size, count)
    const first = index.list({ filter: {}, order: 'asc', limit: 2 }).items
    assert.deepEqual(
      first.map((record) => record.user.id),
      [records.at(-1)?.user.id, records.at(-2)?.user.id],
    )
    assert.ok(ms < 5000, `200,000 puts, newest first, took ${Math.round(ms)} ms`)
  })
})
