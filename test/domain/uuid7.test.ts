import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { createIdGenerator, isCanonicalUuid } from '../../src/domain/uuid7.js'
import { UUID7_PATTERN, uuid7Millis } from '../helpers/users-suite.js'

const MS = Date.UTC(2026, 10, 21, 13, 47, 0, 123)

describe('createIdGenerator', () => {
  it('makes 5000 strictly increasing, valid UUIDv7 ids within one millisecond', () => {
    const newId = createIdGenerator()
    const ids: string[] = []
    let lastMs = MS
    for (let i = 0; i < 5000; i += 1) {
      const { id, ms } = newId(MS)
      assert.match(id, UUID7_PATTERN)
      assert.equal(uuid7Millis(id), ms, `the id's timestamp is the ms it reports: ${id}`)
      assert.ok(ms >= lastMs, 'the timestamp never goes back')
      lastMs = ms
      ids.push(id)
    }
    for (let i = 1; i < ids.length; i += 1) {
      const [previous, current] = [ids[i - 1] ?? '', ids[i] ?? '']
      assert.ok(previous < current, `ids[${i - 1}] ${previous} < ids[${i}] ${current}`)
    }
    assert.equal(uuid7Millis(ids[0] ?? ''), MS, 'the first id carries the clock time')
    // 12 bits of counter cannot hold 5000 ids: the generator borrows the next milliseconds.
    assert.ok(lastMs > MS && lastMs <= MS + 2, `borrowed a little time only: ${lastMs - MS} ms`)
  })

  it('carries the clock time (floored to the millisecond) when the clock moves', () => {
    const newId = createIdGenerator()
    for (const now of [MS, MS + 1, MS + 1000.9, MS + 86_400_000]) {
      const { id, ms } = newId(now)
      assert.equal(ms, Math.floor(now))
      assert.equal(uuid7Millis(id), Math.floor(now))
    }
  })

  it('keeps ids increasing when the clock steps back', () => {
    const newId = createIdGenerator()
    const first = newId(MS)
    const second = newId(MS - 60_000)
    const third = newId(MS - 120_000)
    assert.ok(first.id < second.id && second.id < third.id, `${first.id} ${second.id} ${third.id}`)
    assert.equal(second.ms, MS)
    assert.equal(third.ms, MS)
  })

  it('makes different ids in two generators at the same millisecond', () => {
    const ids = new Set<string>()
    for (let i = 0; i < 50; i += 1) ids.add(createIdGenerator()(MS).id)
    assert.equal(ids.size, 50)
  })
})

describe('isCanonicalUuid', () => {
  it('accepts canonical lower-case UUIDs of any version', () => {
    for (const id of [
      '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b',
      '00000000-0000-0000-0000-000000000000',
      '123e4567-e89b-42d3-a456-426614174000',
      createIdGenerator()(MS).id,
    ]) {
      assert.equal(isCanonicalUuid(id), true, id)
    }
  })

  it('refuses anything else', () => {
    for (const id of [
      '',
      '0193A5F2-7C1E-7D3A-9B2F-1C2D3E4F5A6B',
      '0193a5f27c1e7d3a9b2f1c2d3e4f5a6b',
      '{0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b}',
      '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6',
      '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6bb',
      '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6g',
      '0193a5f2_7c1e_7d3a_9b2f_1c2d3e4f5a6b',
      ' 0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b',
      '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b\n',
      '../../etc/passwd',
    ]) {
      assert.equal(isCanonicalUuid(id), false, JSON.stringify(id))
    }
  })
})
