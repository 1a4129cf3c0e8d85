/**
 * Limits that hold for the whole service, not for one process: MAX_EVENT_STREAMS and the one
 * import at a time. In one process a counter; with WORKERS > 1 the cluster's primary keeps the
 * count and its workers ask it over the IPC channel (process/cluster-slots.ts).
 */

/** What is counted: the open event streams, and the import running. */
export type SlotName = 'event-streams' | 'import'

/**
 * A slot taken from a limit; release() gives it back, once (a second call does nothing more), and
 * resolves once every process sees it free (with WORKERS > 1, once the primary has it back).
 */
export interface Slot {
  release(): Promise<void>
}

export interface SharedSlots {
  /** One of `max` slots of `name`, or undefined when all of them are taken. */
  acquire(name: SlotName, max: number): Promise<Slot | undefined>
}

/**
 * The counts behind the slots, by holder (a worker, or 0 for this process), so that a holder that
 * is gone (a worker that died) gives all of its slots back at once.
 */
export class SlotCounts {
  readonly #taken = new Map<SlotName, number>()
  readonly #held = new Map<number, Map<SlotName, number>>()

  /** Takes one slot of `name` for `holder` when fewer than `max` are taken; false otherwise. */
  take(name: SlotName, max: number, holder: number): boolean {
    const taken = this.#taken.get(name) ?? 0
    if (taken >= max) return false
    this.#taken.set(name, taken + 1)
    const held = this.#held.get(holder) ?? new Map<SlotName, number>()
    held.set(name, (held.get(name) ?? 0) + 1)
    this.#held.set(holder, held)
    return true
  }

  /** Gives back one slot of `name` that `holder` took (nothing when it holds none). */
  give(name: SlotName, holder: number): void {
    const held = this.#held.get(holder)
    const count = held?.get(name) ?? 0
    if (held === undefined || count === 0) return
    held.set(name, count - 1)
    this.#taken.set(name, (this.#taken.get(name) ?? 1) - 1)
  }

  /** Gives back every slot `holder` took. */
  drop(holder: number): void {
    for (const [name, count] of this.#held.get(holder) ?? []) {
      this.#taken.set(name, (this.#taken.get(name) ?? count) - count)
    }
    this.#held.delete(holder)
  }

  /** Slots of `name` taken now. */
  taken(name: SlotName): number {
    return this.#taken.get(name) ?? 0
  }
}

/** The slots of a service that runs in one process: counted here, at once. */
export function createLocalSlots(): SharedSlots {
  const counts = new SlotCounts()
  return {
    acquire(name, max) {
      if (!counts.take(name, max, 0)) return Promise.resolve(undefined)
      return Promise.resolve(onceReleased(async () => counts.give(name, 0)))
    },
  }
}

/** A slot whose release runs `give` the first time only; every call gets its promise. */
export function onceReleased(give: () => Promise<void>): Slot {
  let released: Promise<void> | undefined
  return {
    release() {
      released ??= give()
      return released
    },
  }
}
