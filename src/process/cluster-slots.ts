import cluster, { type Worker } from 'node:cluster'

import { onceReleased, type SharedSlots, SlotCounts, type SlotName } from '../ops/shared-slots.js'

/**
 * The service-wide limits of WORKERS > 1 (ops/shared-slots.ts): the primary counts the slots,
 * each worker asks it over node:cluster's IPC channel. A worker that dies gives its slots back.
 */

const KIND = 'user-service:slot'

/** A worker's message to the primary. */
type Ask =
  | { kind: typeof KIND; op: 'acquire'; ask: number; name: SlotName; max: number }
  | { kind: typeof KIND; op: 'release'; name: SlotName }

/** The primary's answer to one acquire. */
interface Answer {
  kind: typeof KIND
  ask: number
  granted: boolean
}

const SLOT_NAMES: readonly SlotName[] = ['event-streams', 'import']

function isAsk(message: unknown): message is Ask {
  if (typeof message !== 'object' || message === null) return false
  const m = message as Record<string, unknown>
  if (m['kind'] !== KIND || !SLOT_NAMES.includes(m['name'] as SlotName)) return false
  if (m['op'] === 'release') return true
  return m['op'] === 'acquire' && Number.isSafeInteger(m['ask']) && Number.isSafeInteger(m['max'])
}

function isAnswer(message: unknown): message is Answer {
  if (typeof message !== 'object' || message === null) return false
  const m = message as Record<string, unknown>
  return m['kind'] === KIND && Number.isSafeInteger(m['ask']) && typeof m['granted'] === 'boolean'
}

/** In the primary: answers every worker's asks, and frees the slots of a worker that exits. */
export function serveClusterSlots(): void {
  const counts = new SlotCounts()
  cluster.on('message', (worker: Worker, message: unknown) => {
    if (!isAsk(message)) return
    if (message.op === 'release') {
      counts.give(message.name, worker.id)
      return
    }
    const granted = counts.take(message.name, message.max, worker.id)
    const answer: Answer = { kind: KIND, ask: message.ask, granted }
    // A worker gone meanwhile: its exit below frees what it was just given.
    if (worker.isConnected()) worker.send(answer)
    else if (granted) counts.give(message.name, worker.id)
  })
  cluster.on('exit', (worker) => {
    counts.drop(worker.id)
  })
}

/**
 * In a worker: slots asked of the primary. Without the channel (the primary gone) every ask is
 * refused: the limits cannot be kept, so nothing more is let through.
 */
export function createClusterSlots(): SharedSlots {
  const send = process.send?.bind(process)
  if (send === undefined) throw new Error('createClusterSlots: not a cluster worker')
  const pending = new Map<number, (granted: boolean) => void>()
  let next = 0
  process.on('message', (message: unknown) => {
    if (!isAnswer(message)) return
    pending.get(message.ask)?.(message.granted)
    pending.delete(message.ask)
  })
  process.on('disconnect', () => {
    for (const settle of pending.values()) settle(false)
    pending.clear()
  })
  const post = (ask: Ask): boolean => {
    if (!process.connected) return false
    send(ask)
    return true
  }
  return {
    acquire(name, max) {
      next += 1
      const ask = next
      return new Promise<boolean>((resolve) => {
        pending.set(ask, resolve)
        if (!post({ kind: KIND, op: 'acquire', ask, name, max })) {
          pending.delete(ask)
          resolve(false)
        }
      }).then((granted) =>
        granted ? onceReleased(() => post({ kind: KIND, op: 'release', name })) : undefined,
      )
    },
  }
}
