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
  | { kind: typeof KIND; op: 'release'; ask: number; name: SlotName }

/** The primary's answer to one ask: granted or not (an acquire), or done (a release). */
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
  if (!Number.isSafeInteger(m['ask'])) return false
  return m['op'] === 'release' || (m['op'] === 'acquire' && Number.isSafeInteger(m['max']))
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
      // The worker waits for this before it answers its client, who may then ask again at once.
      if (worker.isConnected()) worker.send({ kind: KIND, ask: message.ask, granted: true })
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
  /** Sends an ask and resolves with its answer (false without the channel). */
  const asked = (ask: Ask): Promise<boolean> =>
    new Promise<boolean>((resolve) => {
      pending.set(ask.ask, resolve)
      if (!post(ask)) {
        pending.delete(ask.ask)
        resolve(false)
      }
    })
  const nextAsk = (): number => {
    next += 1
    return next
  }
  return {
    acquire(name, max) {
      return asked({ kind: KIND, op: 'acquire', ask: nextAsk(), name, max }).then((granted) =>
        granted
          ? onceReleased(async () => {
              // Without the channel the primary is gone, and so is its count.
              await asked({ kind: KIND, op: 'release', ask: nextAsk(), name })
            })
          : undefined,
      )
    },
  }
}
