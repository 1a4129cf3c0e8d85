import { Agent } from 'node:http'
import path from 'node:path'
import type { TestContext } from 'node:test'

import { type RunningChild, startChild } from './child.js'
import { makeTempDir } from './service.js'

export interface MeasuredChild {
  readonly child: RunningChild
  /** Its pid, for readRssMb and sampleRss. */
  readonly pid: number
}

/**
 * A service child whose memory a test samples, on a data directory of its own, killed when the
 * test ends. With `heapMb`, its young generation is small and its heap capped: V8 then collects as
 * it goes (on Node 20; Node 26 grows its committed heap to the cap first), and a service that keeps
 * more than the cap runs out of heap.
 */
export async function startMeasuredChild(
  t: TestContext,
  options: { env?: Record<string, string>; heapMb?: number } = {},
): Promise<MeasuredChild> {
  const { heapMb } = options
  const heap =
    heapMb === undefined
      ? {}
      : {
          NODE_OPTIONS:
            `${process.env['NODE_OPTIONS'] ?? ''} --max-semi-space-size=1 --max-old-space-size=${heapMb}`.trim(),
        }
  const dataDir = path.join(await makeTempDir(t), 'data')
  const child = await startChild({ dataDir, env: { ...options.env, ...heap } })
  t.after(() => child.stop('SIGKILL'))
  const pid = child.proc.pid
  if (pid === undefined) throw new Error('the child has no pid')
  return { child, pid }
}

/** A keep-alive agent of `sockets` connections, destroyed when the test ends. */
export function keepAliveAgent(t: TestContext, sockets: number): Agent {
  const agent = new Agent({ keepAlive: true, maxSockets: sockets })
  t.after(() => {
    agent.destroy()
  })
  return agent
}
