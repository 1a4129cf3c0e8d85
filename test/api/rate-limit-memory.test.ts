import assert from 'node:assert/strict'
import { type Agent, request as httpRequest } from 'node:http'
import { describe, it } from 'node:test'

import { keepAliveAgent, startMeasuredChild } from '../helpers/measured-child.js'
import { readRssMb } from '../helpers/proc-stats.js'

const CLIENTS = 100_000
const MAX_CLIENTS = 10_000
const CONCURRENCY = 16
/** Room for the heap's garbage between two samples; an entry per client would be tens of MB. */
const GROWTH_MB = 12

/** One counted request from the client `n` (a trusted proxy's X-Forwarded-For); its X-RateLimit-Remaining. */
function fromClient(url: string, agent: Agent, n: number): Promise<string> {
  const client = `2001:db8:${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}::1`
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}/users`,
      { agent, headers: { 'x-forwarded-for': client } },
      (res) => {
        res.resume()
        res.on('end', () => {
          resolve(String(res.headers['x-ratelimit-remaining']))
        })
      },
    )
    req.on('error', reject)
    req.end()
  })
}

async function sendRange(url: string, agent: Agent, from: number, to: number): Promise<void> {
  let next = from
  const worker = async (): Promise<void> => {
    while (next < to) {
      const n = next
      next += 1
      assert.equal(await fromClient(url, agent, n), '4', `client ${n} has a fresh window`)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
}

describe('rate limits: bounded memory', () => {
  it('keeps RSS flat under 100,000 distinct clients, the table bounded by RATE_LIMIT_MAX_CLIENTS', async (t) => {
    // A capped heap: without it, a full run of the suite had +15 MB of garbage V8 let pile up.
    const { child, pid } = await startMeasuredChild(t, {
      env: {
        LOG_LEVEL: 'silent',
        RATE_LIMIT_ADDRESS: '5/3600',
        RATE_LIMIT_MAX_CLIENTS: String(MAX_CLIENTS),
        TRUSTED_PROXIES: '127.0.0.1',
      },
      heapMb: 48,
    })
    const agent = keepAliveAgent(t, CONCURRENCY)
    // Twice the table's size: full, and evicting, before the first sample.
    await sendRange(child.url, agent, 0, 2 * MAX_CLIENTS)
    const before = readRssMb(pid)
    await sendRange(child.url, agent, 2 * MAX_CLIENTS, CLIENTS)
    const after = readRssMb(pid)
    assert.ok(
      after - before < GROWTH_MB,
      `RSS ${before.toFixed(1)} MB after ${2 * MAX_CLIENTS} clients, ${after.toFixed(1)} MB after ${CLIENTS}`,
    )
    // The newest clients are still counted; the first were evicted and start afresh.
    assert.equal(await fromClient(child.url, agent, CLIENTS - 1), '3')
    assert.equal(await fromClient(child.url, agent, 0), '4')
  })
})
