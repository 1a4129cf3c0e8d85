import assert from 'node:assert/strict'
import { type Agent, request as httpRequest } from 'node:http'
import { describe, it } from 'node:test'

import { keepAliveAgent, startMeasuredChild } from '../helpers/measured-child.js'
import { readRssMb } from '../helpers/proc-stats.js'
import { makeToken } from '../helpers/tokens.js'

const CONCURRENCY = 8
/** Tokens sent: twice what the 8 MiB cache holds of tokens this size, so it is full and evicting. */
const TOKENS = 2_500
/** The cache's 8 MiB, and room for the heap's garbage between the two samples. */
const GROWTH_MB = 24

/**
 * A valid token of about 7 KB whose `scope` names some 1,500 distinct scopes the service does not
 * know (an issuer may add its own), and users:read.
 */
function manyScopesToken(n: number): string {
  const scopes: string[] = []
  for (let i = 0, length = 0; length < 5_000; i += 1) {
    const scope = (n * 10_000 + i).toString(36)
    scopes.push(scope)
    length += scope.length + 1
  }
  return makeToken({ sub: `flood-${n}`, scope: `${scopes.join(' ')} users:read`, ttl: 3600 })
}

function status(url: string, agent: Agent, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}/users?limit=1`,
      { agent, headers: { authorization: `Bearer ${token}` } },
      (res) => {
        res.resume()
        res.on('end', () => {
          resolve(res.statusCode ?? 0)
        })
      },
    )
    req.on('error', reject)
    req.end()
  })
}

async function send(url: string, agent: Agent, from: number, to: number): Promise<void> {
  let next = from
  const worker = async (): Promise<void> => {
    while (next < to) {
      const n = next
      next += 1
      assert.equal(await status(url, agent, manyScopesToken(n)), 200, `token ${n}`)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
}

describe('the verified-token cache: bounded memory', () => {
  it('keeps RSS within its 8 MiB under distinct valid tokens that name thousands of scopes', async (t) => {
    const { child, pid } = await startMeasuredChild(t, {
      env: { LOG_LEVEL: 'silent' },
      heapMb: 128,
    })
    const agent = keepAliveAgent(t, CONCURRENCY)
    // Warm up the code paths with a few such tokens before the first sample.
    await send(child.url, agent, 0, 50)
    const before = readRssMb(pid)
    await send(child.url, agent, 50, TOKENS)
    const after = readRssMb(pid)
    const metrics = await (await fetch(`${child.url}/metrics`)).text()
    const cachedBytes = Number(/^user_service_token_cache_bytes (\d+)$/m.exec(metrics)?.[1])
    assert.ok(cachedBytes <= 8 * 1024 * 1024, `${cachedBytes} bytes counted`)
    assert.ok(
      after - before < GROWTH_MB,
      `RSS ${before.toFixed(1)} MB after 50 tokens, ${after.toFixed(1)} MB after ${TOKENS}`,
    )
  })
})
