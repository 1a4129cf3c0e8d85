/*
 * A cluster of one primary and one worker, for test/process/cluster-slots.test.ts: the primary
 * serves the slots (process/cluster-slots.ts); the worker takes the import slot, has the primary
 * block its event loop for BLOCK_MS, gives the slot back at once and times how long its release
 * took to resolve, then takes the slot again. The primary prints the worker's report as one JSON
 * line and exits.
 */
import cluster from 'node:cluster'

import { createClusterSlots, serveClusterSlots } from '../../src/process/cluster-slots.js'

/** Not imported by the test (it would run the cluster): the report carries the block's length. */
const BLOCK_MS = 400

if (cluster.isPrimary) {
  serveClusterSlots()
  const worker = cluster.fork()
  worker.on('message', (message: { kind?: string }) => {
    if (message.kind === 'block') {
      const until = Date.now() + BLOCK_MS
      while (Date.now() < until) {
        // Busy: the release the worker sends meanwhile waits in the channel.
      }
    }
    if (message.kind === 'report') {
      process.stdout.write(`${JSON.stringify(message)}\n`)
      worker.kill()
      process.exit(0)
    }
  })
} else {
  const slots = createClusterSlots()
  const slot = await slots.acquire('import', 1)
  process.send?.({ kind: 'block' })
  const started = performance.now()
  await slot?.release()
  const releaseMs = performance.now() - started
  const again = await slots.acquire('import', 1)
  const report = {
    kind: 'report',
    blockMs: BLOCK_MS,
    granted: slot !== undefined,
    releaseMs,
    grantedAgain: again !== undefined,
  }
  process.send?.(report)
}
