import assert from 'node:assert/strict'
import { type Agent, request as httpRequest } from 'node:http'
import { describe, it } from 'node:test'

import { keepAliveAgent, startMeasuredChild } from '../helpers/measured-child.js'
import { makeToken } from '../helpers/tokens.js'

const CONCURRENCY = 8
/** Tokens sent: twice what the 8 MiB cache holds of tokens this size, so it is full and evicting. */
const TOKENS = 2_500
/**
 * The child's heap: its own few MiB, the cache's 8 MiB of tokens and room to collect garbage. Kept
 * sets of every scope a token named held some 50 MiB more, and the child then ran out of heap.
 * (RSS is not compared: Node 26 lets the heap's committed pages grow to the cap before it
 * collects, whatever is kept.)
 */
const HEAP_MB = 32

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
  it('holds distinct valid tokens that name thousands of scopes within its bound', async (t) => {
    const { child } = await startMeasuredChild(t, {
      env: { LOG_LEVEL: 'silent' },
      heapMb: HEAP_MB,
    })
    const agent = keepAliveAgent(t, CONCURRENCY)
    // Every token answered 200: a child out of heap would have reset its connections.
    await send(child.url, agent, 0, TOKENS)
    assert.equal(child.proc.exitCode, null, 'the child is still running')
    const metrics = await (await fetch(`${child.url}/metrics`)).text()
    const cachedBytes = Number(/^user_service_token_cache_bytes (\d+)$/m.exec(metrics)?.[1])
    assert.ok(cachedBytes > 6 * 1024 * 1024, `${cachedBytes} bytes counted: the cache is full`)
    assert.ok(cachedBytes <= 8 * 1024 * 1024, `${cachedBytes} bytes counted`)
  })
})
