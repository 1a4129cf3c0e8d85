// The child processes of the webhook cases (webhooks.ts), each a compiled bench script forked
// with an IPC channel: the receiver (webhook-receiver.ts) and the paced writer (paced-writer.ts).
import { type ChildProcess, fork } from 'node:child_process'

import { compiledReference } from './compile.js'
import { cpuSeconds, track } from './procs.js'

export const fields = (message: unknown): Record<string, unknown> =>
  typeof message === 'object' && message !== null ? { ...message } : {}

const count = (value: unknown): number => (typeof value === 'number' ? value : Number.NaN)

/** A compiled bench script forked with an IPC channel, without tsx's loader. */
const forkScript = (name: string, args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess =>
  track(
    fork(compiledReference(name), args, {
      execArgv: [],
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    }),
  )

/** The next IPC message of `child`; rejects if it exits first. */
const nextMessage = (child: ChildProcess, what: string): Promise<Record<string, unknown>> =>
  new Promise((resolve, reject) => {
    const exited = (code: number | null): void =>
      reject(new Error(`${what} exited (code ${String(code)})`))
    child.once('exit', exited)
    child.once('message', (message: unknown) => {
      child.off('exit', exited)
      resolve(fields(message))
    })
  })

export interface Receiver {
  url: string
  /** Distinct deliveries since the last take. */
  count: () => Promise<number>
  take: () => Promise<{ lags: Map<string, number>; duplicates: number }>
  /** CPU seconds (user + system) the receiver has used: on a small machine it competes too. */
  cpuSeconds: () => number
  close: () => Promise<void>
}

export const startReceiver = async (mode: 'count' | 'record'): Promise<Receiver> => {
  const child = forkScript('webhook-receiver', [mode])
  const pid = child.pid
  if (pid === undefined) throw new Error('webhook receiver: spawn failed')
  const port = count((await nextMessage(child, 'webhook receiver'))['port'])
  const ask = (what: string): Promise<Record<string, unknown>> => {
    const answer = nextMessage(child, 'webhook receiver')
    child.send({ ask: what })
    return answer
  }
  return {
    url: `http://127.0.0.1:${port}/hook`,
    count: async () => count((await ask('count'))['count']),
    take: async () => {
      const answer = await ask('take')
      const lags = new Map<string, number>()
      const deliveries = answer['deliveries']
      for (const entry of Array.isArray(deliveries) ? deliveries : []) {
        if (Array.isArray(entry) && typeof entry[0] === 'string' && typeof entry[1] === 'number')
          lags.set(entry[0], entry[1])
      }
      return { lags, duplicates: count(answer['duplicates']) }
    },
    cpuSeconds: () => cpuSeconds(pid),
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    },
  }
}

export interface Written {
  sent: number
  /** The ids of the users created (answered 201). */
  ids: string[]
  /** Answered otherwise, or not at all. */
  failed: number
  /** From the first request to the last answer. */
  seconds: number
}

/** The paced writer: `rate` creates a second for `seconds`; resolves once every one is answered. */
export const pacedWrites = async (
  url: string,
  auth: string,
  rate: number,
  seconds: number,
): Promise<Written> => {
  const child = forkScript('paced-writer', [url, String(rate), String(seconds)], {
    BENCH_AUTH: auth,
  })
  const m = await nextMessage(child, 'paced writer')
  const ids = Array.isArray(m['ids']) ? m['ids'].filter((x) => typeof x === 'string') : []
  return { sent: count(m['sent']), ids, failed: count(m['failed']), seconds: count(m['seconds']) }
}
