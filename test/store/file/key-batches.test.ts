// KeyBatches on a real directory: key files written durably in batches on the writer's thread,
// each with its key's expiry as its time, a bounded queue, and a failed batch told whole.
import assert from 'node:assert/strict'
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { KeptKey } from '../../../src/domain/kept-key.js'
import { KeyBatches, type QueuedKey } from '../../../src/store/file/key-batches.js'
import { keyFileJson, keyFileName, parseKeyFile } from '../../../src/store/file/key-format.js'
import { WriteError } from '../../../src/store/write-error.js'
import { makeTempDir } from '../../helpers/service.js'

const kept = (n: number, expiresAt = Date.parse('2031-05-06T07:08:09.123Z') + n): KeptKey => ({
  subject: 'batches',
  key: `key-${n}`,
  fingerprint: 'a'.repeat(64),
  answer: { status: 201, body: `{"n":${n}}`, contentType: 'application/json' },
  expiresAt,
})

const queued = (n: number): QueuedKey => {
  const key = kept(n)
  return { name: keyFileName(key.subject, key.key), kept: key, json: keyFileJson(key) }
}

describe('KeyBatches: key files written in batches', () => {
  it('writes the keys queued while a batch runs as the next batch, each file whole with its expiry as its time', async (t) => {
    const dir = path.join(await makeTempDir(t, 'key-batches-'), 'keys')
    mkdirSync(dir)
    const batches: QueuedKey[][] = []
    const batcher = new KeyBatches<QueuedKey>({
      dir,
      written: (batch) => batches.push([...batch]),
      failed: (_, error) => assert.fail(String(error)),
    })
    t.after(() => batcher.close())
    const keys = Array.from({ length: 200 }, (_, n) => queued(n))
    for (const key of keys) batcher.add(key)
    await batcher.close()
    assert.deepEqual(
      batches.flat().map((key) => key.name),
      keys.map((key) => key.name),
      'every key written once, in order',
    )
    assert.equal(batches[0]?.length, 1, 'the first key goes at once')
    assert.equal(batches.length, 2, 'the 199 keys queued meanwhile make one batch')
    for (const key of keys) {
      const file = path.join(dir, key.name)
      assert.deepEqual(parseKeyFile(readFileSync(file, 'utf8')), key.kept)
      assert.equal(Math.round(statSync(file).mtimeMs), key.kept.expiresAt)
      assert.equal(statSync(file).mode & 0o777, 0o600)
    }
    assert.equal(readdirSync(dir).length, keys.length, 'no temp file left')
  })

  it('makes a writer wait while the queue is full, until the batch running is written', async (t) => {
    const dir = path.join(await makeTempDir(t, 'key-batches-'), 'keys')
    mkdirSync(dir)
    let written = 0
    const batcher = new KeyBatches<QueuedKey>({
      dir,
      written: (batch) => {
        written += batch.length
      },
      failed: (_, error) => assert.fail(String(error)),
    })
    t.after(() => batcher.close())
    // The first goes to the thread at once; the next three wait in the queue.
    for (let n = 0; n < 4; n += 1) batcher.add(queued(n))
    let roomAt = -1
    await Promise.all([
      batcher.room(3).then(() => {
        roomAt = written
      }),
      batcher.room(4).then(() => assert.equal(written, 0, 'below the limit: no wait')),
    ])
    assert.equal(roomAt, 1, 'room(3) waited for the running batch of one')
    await batcher.close()
    assert.equal(written, 4)
  })

  it('tells a failed batch whole (a WriteError), and writes the keys added after it', async (t) => {
    const root = await makeTempDir(t, 'key-batches-')
    const dir = path.join(root, 'keys')
    const failures: { names: string[]; error: unknown }[] = []
    const written: string[] = []
    const batcher = new KeyBatches<QueuedKey>({
      dir,
      written: (batch) => written.push(...batch.map((key) => key.name)),
      failed: (batch, error) => failures.push({ names: batch.map((key) => key.name), error }),
    })
    t.after(() => batcher.close())
    // No directory yet: the first batch cannot be written.
    const [one, two] = [queued(1), queued(2)]
    batcher.add(one)
    await batcher.close()
    assert.equal(failures.length, 1)
    assert.deepEqual(failures[0]?.names, [one.name])
    const error = failures[0]?.error
    assert.ok(error instanceof WriteError && error.step === 'write', String(error))
    assert.deepEqual(written, [])
    mkdirSync(dir)
    batcher.add(two)
    await batcher.close()
    assert.deepEqual(written, [two.name])
    assert.deepEqual(readdirSync(dir), [two.name])
    rmSync(dir, { recursive: true })
  })
})
