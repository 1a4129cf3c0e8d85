import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { LineOrder } from '../../src/bulk/line-order.js'

/** A promise with its resolve at hand. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined
  const promise = new Promise<void>((ok) => {
    resolve = ok
  })
  return { promise, resolve }
}

describe('LineOrder (the input order of import lines that share a key)', () => {
  it('runs a line after every earlier line that shares one of its keys, failed or not, and the others at once', async () => {
    const order = new LineOrder()
    const log: string[] = []
    const first = deferred()
    const onA = order.run(['a'], async () => {
      log.push('a start')
      await first.promise
      log.push('a end')
    })
    const failing = order.run(['b'], () => Promise.reject(new Error('b failed')))
    const both = order.run(['a', 'b'], async () => {
      log.push('a+b')
    })
    const onB = order.run(['b', 'c'], async () => {
      log.push('b+c')
    })
    const apart = order.run(['d'], async () => {
      log.push('d')
      return 42
    })
    assert.equal(await apart, 42)
    await assert.rejects(failing, /b failed/)
    assert.deepEqual(log, ['a start', 'd'], 'a+b waits for a, and b+c for a+b')
    first.resolve()
    await Promise.all([onA, both, onB])
    assert.deepEqual(log, ['a start', 'd', 'a end', 'a+b', 'b+c'])
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(order.size, 0, 'no key is held once every line is over')
  })
})
