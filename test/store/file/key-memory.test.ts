import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'

import { sleep, spawnService } from '../../helpers/child.js'
import { helperScript } from '../../helpers/child-scripts.js'
import { makeTempDir } from '../../helpers/service.js'

const CHILD = helperScript('key-child')
const KEYS = 100_000
/** Room for the heap's garbage and the feed's index (a few bytes an event); a kept key is ~1 KB. */
const GROWTH_MB = 12

describe('FileStore: kept keys in bounded memory', () => {
  it('keeps RSS flat while 100,000 distinct keys are kept: they live in journals on disk, memory holds a bounded cache', {
    timeout: 300_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'keys-memory-'), 'data')
    const child = spawnService({
      dataDir,
      env: {
        // A small young generation and a capped heap, as in the rate limits' memory test: RSS
        // measures what is kept, not the garbage V8 let pile up.
        NODE_OPTIONS:
          `${process.env['NODE_OPTIONS'] ?? ''} --max-semi-space-size=1 --max-old-space-size=64`.trim(),
      },
      args: [CHILD, 'memory', dataDir, String(KEYS)],
    })
    t.after(() => {
      child.proc.kill('SIGKILL')
    })
    const rss = (): number[] =>
      [...child.stdout().matchAll(/^rss ([\d.]+)$/gm)].map((match) => Number(match[1]))
    while (!child.stdout().includes('done\n')) {
      if (child.proc.exitCode !== null || child.proc.signalCode !== null)
        assert.fail(`the child stopped:\n${child.stderr().slice(-2000)}`)
      await sleep(100)
    }
    const [before, after] = rss()
    assert.ok(before !== undefined && after !== undefined, child.stdout())
    assert.ok(
      after - before < GROWTH_MB,
      `RSS ${before.toFixed(1)} MB after ${KEYS / 5} keys, ${after.toFixed(1)} MB after ${KEYS}`,
    )
  })
})
