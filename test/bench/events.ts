// The change feed's costs (§10), not a unit test: `node --import tsx test/bench/events.ts`.
// 1. Write throughput with events on against the same build with events written nowhere: the file
//    store creating users from 16 concurrent writers for BENCH_DURATION_S seconds, alternating the
//    two stores over BENCH_RUNS runs; the ratio of the medians must be at least 0.9.
// 2. Live latency: a service on port 0 with one SSE consumer; each POST /users is timed from the
//    moment it is sent to the moment its event reaches the consumer; the median must be < 50 ms.
import { mkdtemp, rm } from 'node:fs/promises'
import { request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import path from 'node:path'

import type { ChangeEvent } from '../../src/domain/event.js'
import { createUserService } from '../../src/process/create-user-service.js'
import { FileDurability } from '../../src/store/file/file-durability.js'
import { FileStore } from '../../src/store/file/file-store.js'
import { IndexedStore } from '../../src/store/indexed-store.js'
import type { Store } from '../../src/store/store.js'
import { makeUser } from '../helpers/store-users.js'
import { makeToken, TEST_SECRET } from '../helpers/tokens.js'

const DURATION_S = Number(process.env['BENCH_DURATION_S'] ?? '3')
const RUNS = Number(process.env['BENCH_RUNS'] ?? '3')
const WRITERS = 16

/** The file store's durability with its events kept in memory only: "written nowhere". */
class NoEventLog extends FileDurability {
  override logEvent(_event: ChangeEvent): Promise<void> {
    return Promise.resolve()
  }
}

async function creates(make: (dir: string) => Store): Promise<number> {
  const dir = await mkdtemp(path.join(tmpdir(), 'bench-events-'))
  const store = make(dir)
  await store.open()
  let count = 0
  const until = Date.now() + DURATION_S * 1000
  await Promise.all(
    Array.from({ length: WRITERS }, async () => {
      while (Date.now() < until) {
        await store.create(makeUser())
        count += 1
      }
    }),
  )
  await store.close()
  await rm(dir, { recursive: true, force: true })
  return count / DURATION_S
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}

const on: number[] = []
const off: number[] = []
for (let run = 0; run < RUNS; run += 1) {
  off.push(await creates((dir) => new IndexedStore(new NoEventLog({ dataDir: dir }))))
  on.push(await creates((dir) => new FileStore({ dataDir: dir })))
}
const ratio = median(on) / median(off)
process.stdout.write(
  `creates/s with events: ${median(on).toFixed(0)}, events written nowhere: ${median(off).toFixed(0)}, ratio ${ratio.toFixed(3)} (need >= 0.9)\n`,
)

// Live latency.
const dir = await mkdtemp(path.join(tmpdir(), 'bench-events-live-'))
const service = createUserService({ dataDir: dir, secret: TEST_SECRET })
const { url } = await service.listen(0)
await service.open()
const writer = makeToken({ scope: 'users:write' })
const reader = makeToken({ scope: 'events:read' })
const arrived = new Map<string, number>()
let waiting: (() => void) | undefined
const stream = httpRequest(`${url}/events`, {
  headers: { accept: 'text/event-stream', authorization: `Bearer ${reader}` },
})
stream.on('response', (res) => {
  res.setEncoding('utf8')
  res.on('data', (chunk: string) => {
    for (const match of chunk.matchAll(/"userId":"([0-9a-f-]{36})"/g))
      if (match[1] !== undefined) arrived.set(match[1], performance.now())
    waiting?.()
  })
})
stream.end()
await new Promise((resolve) => setTimeout(resolve, 200))
const latencies: number[] = []
for (let i = 0; i < 200; i += 1) {
  const sent = performance.now()
  const res = await fetch(`${url}/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${writer}`, 'content-type': 'application/json' },
    body: JSON.stringify({ email: `bench.${i}.${Date.now()}@example.com`, name: 'Bench' }),
  })
  const { id } = (await res.json()) as { id: string }
  while (!arrived.has(id))
    await new Promise<void>((resolve) => {
      waiting = resolve
    })
  latencies.push((arrived.get(id) ?? sent) - sent)
}
stream.destroy()
await service.close()
await rm(dir, { recursive: true, force: true })
process.stdout.write(
  `live: POST sent → event received, median ${median(latencies).toFixed(2)} ms, p99 ${(latencies.sort((a, b) => a - b)[Math.floor(latencies.length * 0.99)] ?? 0).toFixed(2)} ms (need median < 50 ms)\n`,
)
process.stdout.write(
  `goals: ${ratio >= 0.9 ? 'met' : 'missed'} (throughput), ${median(latencies) < 50 ? 'met' : 'missed'} (latency); a missed goal is a result, not a failure\n`,
)
