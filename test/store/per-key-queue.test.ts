import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { PerKeyQueue } from '../../src/store/per-key-queue.js'

/** A promise with its resolve and reject at hand. */
function deferred(): {
  promise: Promise<void>
  resolve: () => void
  reject: (error: Error) => void
} {
  let resolve!: () => void
  let reject!: (error: Error) => void
  const promise = new Promise<void>((ok, fail) => {
    resolve = ok
    reject = fail
  })
  return { promise, resolve, reject }
}

describe('PerKeyQueue', () => {
  it('runs the tasks of one key one at a time, in order, and those of other keys meanwhile', async () => {
    const queue = new PerKeyQueue()
    const log: string[] = []
    const first = deferred()
    const a1 = queue.run('a', async () => {
      log.push('a1 start')
      await first.promise
      log.push('a1 end')
    })
    const a2 = queue.run('a', async () => {
      log.push('a2')
    })
    const b1 = queue.run('b', async () => {
      log.push('b1')
    })
    await b1
    assert.deepEqual(log, ['a1 start', 'b1'], 'b ran while a1 was still running, a2 had to wait')
    first.resolve()
    await Promise.all([a1, a2])
    assert.deepEqual(log, ['a1 start', 'b1', 'a1 end', 'a2'])
  })

  it("gives each caller its own task's result or failure, and a failure does not stop the next task", async () => {
    const queue = new PerKeyQueue()
    const failing = queue.run('a', () => Promise.reject(new Error('boom')))
    const next = queue.run('a', () => Promise.resolve(42))
    await assert.rejects(failing, /boom/)
    assert.equal(await next, 42)
  })

  it('starts a task only after the previous one of its key settled', async () => {
    const queue = new PerKeyQueue()
    const gate = deferred()
    let secondStarted = false
    const first = queue.run('a', () => gate.promise)
    const second = queue.run('a', async () => {
      secondStarted = true
    })
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(secondStarted, false)
    gate.reject(new Error('first failed'))
    await assert.rejects(first, /first failed/)
    await second
    assert.equal(secondStarted, true)
  })
})
