import { isExpired, type KeptKey } from '../domain/kept-key.js'
import type { KeptKeys, KeyHold } from './kept-keys.js'

const HELD: Promise<KeyHold> = Promise.resolve('held')
const DONE: Promise<void> = Promise.resolve()

/** The name of a subject's key in a map: a NUL cannot occur in either (both are checked). */
export function keyName(subject: string, key: string): string {
  return `${subject}\u0000${key}`
}

/**
 * Kept keys in memory, for the memory store (whose users are in memory too): expired ones are
 * dropped as they are met, and by `sweep`, which the store runs now and then.
 */
export class MemoryKeys implements KeptKeys {
  readonly #kept = new Map<string, KeptKey>()
  readonly #now: () => number

  constructor(now: () => number = Date.now) {
    this.#now = now
  }

  get size(): number {
    return this.#kept.size
  }

  find(subject: string, key: string): Promise<KeptKey | undefined> {
    const name = keyName(subject, key)
    const kept = this.#kept.get(name)
    if (kept === undefined || !isExpired(kept, this.#now())) return Promise.resolve(kept)
    this.#kept.delete(name)
    return Promise.resolve(undefined)
  }

  hold(): Promise<KeyHold> {
    return HELD
  }

  release(): Promise<void> {
    return DONE
  }

  keepAlone(kept: KeptKey): Promise<void> {
    this.put(kept)
    return DONE
  }

  /** Keeps a key that went with a change. */
  put(kept: KeptKey): void {
    this.#kept.set(keyName(kept.subject, kept.key), kept)
  }

  /** Drops the keys that have expired. */
  sweep(): void {
    const now = this.#now()
    for (const [name, kept] of this.#kept) {
      if (isExpired(kept, now)) this.#kept.delete(name)
    }
  }
}
