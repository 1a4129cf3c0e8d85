/** An import's blank lines take the event loop in turns, as its other lines do. */
import assert from 'node:assert/strict'
import { get, type IncomingMessage, request } from 'node:http'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { describe, it } from 'node:test'

import { sleep, startChild } from '../helpers/child.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()
const MiB = 1024 * 1024

/** Milliseconds /healthz takes to answer 200, on a connection of its own. */
async function healthLatencyMs(url: string): Promise<number> {
  const started = performance.now()
  const status = await new Promise<number | undefined>((resolve, reject) => {
    get(`${url}/healthz`, { agent: false }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
    }).on('error', reject)
  })
  assert.equal(status, 200)
  return performance.now() - started
}

describe('an import with 16 MiB of blank lines read ahead', () => {
  it('keeps /healthz answering while it passes over them', { timeout: 120_000 }, async (t) => {
    const child = await startChild({ dataDir: path.join(await makeTempDir(t), 'data') })
    t.after(() => child.stop('SIGKILL'))
    // Lines refused at once fill the results held for a client that does not read; meanwhile
    // the blank lines behind them are read ahead (16 MiB), and are passed over once it reads.
    const refused = 400_000
    const blank = 16 * MiB
    const last = JSON.stringify({ email: uniqueEmail('after-blanks'), name: 'After Blanks' })
    const body = Buffer.concat([
      Buffer.alloc(refused * 2, 'x\n'),
      Buffer.alloc(blank, '\n'),
      Buffer.from(`${last}\n`),
    ])
    const req = request(`${child.url}/users:import`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/x-ndjson',
        'content-length': body.length,
      },
    })
    t.after(() => {
      req.destroy()
    })
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      req.on('response', resolve)
      req.on('error', reject)
      req.end(body)
    })
    assert.equal(res.statusCode, 200)
    // Its answer is not read for a while: the run stops starting lines and reads the body ahead.
    res.pause()
    await sleep(2000)
    let tail = ''
    let done = false
    res.on('data', (chunk: Buffer) => {
      tail = (tail + chunk.toString('utf8')).slice(-400)
    })
    res.on('end', () => {
      done = true
    })
    res.resume()
    let slowestMs = 0
    while (!done) {
      slowestMs = Math.max(slowestMs, await healthLatencyMs(child.url))
      await sleep(50)
    }
    t.diagnostic(`slowest /healthz ${Math.round(slowestMs)} ms`)
    const lastResult = JSON.parse(tail.trimEnd().split('\n').at(-1) ?? '') as Record<
      string,
      unknown
    >
    assert.equal(lastResult['status'], 201, tail)
    assert.equal(lastResult['line'], refused + blank + 1)
    // Passing over 16 MiB of blank lines in one go holds the loop for seconds.
    assert.ok(slowestMs < 1000, `/healthz took ${Math.round(slowestMs)} ms during the import`)
  })
})
