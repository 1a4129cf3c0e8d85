import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { ByteLru } from '../../src/store/byte-lru.js'

describe('ByteLru', () => {
  it('never holds more bytes than its budget, dropping the least recently used first', () => {
    const cache = new ByteLru<number>(1000)
    for (let n = 0; n < 10; n += 1) cache.set(`k${n}`, n, 100)
    assert.equal(cache.bytes, 1000)
    assert.equal(cache.get('k0'), 0, 'read: now the most recently used')
    cache.set('k10', 10, 100)
    assert.equal(cache.get('k1'), undefined, 'the least recently used went')
    assert.equal(cache.get('k0'), 0)
    assert.equal(cache.bytes, 1000)
    for (let n = 0; n < 10_000; n += 1) {
      cache.set(`many${n}`, n, 1 + (n % 120))
      assert.ok(cache.bytes <= 1000, `${cache.bytes} bytes after ${n}`)
    }
    assert.ok(cache.size < 1000)
  })

  it('replaces an entry in place, forgets a deleted one, and keeps none heavier than an eighth', () => {
    const cache = new ByteLru<string>(800)
    cache.set('a', 'first', 50)
    cache.set('a', 'second', 70)
    assert.deepEqual([cache.get('a'), cache.bytes, cache.size], ['second', 70, 1])
    cache.delete('a')
    assert.deepEqual([cache.get('a'), cache.bytes, cache.size], [undefined, 0, 0])
    cache.set('big', 'too big', 101)
    assert.deepEqual([cache.get('big'), cache.bytes], [undefined, 0])
    cache.set('b', 'fits', 100)
    cache.set('b', 'now too big', 101)
    assert.deepEqual([cache.get('b'), cache.bytes], [undefined, 0], 'the old value goes too')
  })
})
