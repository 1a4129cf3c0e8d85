/**
 * A Bloom filter over hex digest names (a kept key's SHA-256): answers "surely absent" or
 * "maybe present" in a fixed number of bytes, however many names it holds. The kept keys use it
 * so that a request with a new key, the usual case, does not wait for a file lookup that finds
 * nothing; a "maybe" (a kept key, or a false positive) still looks. The names are digests already,
 * so its bit positions are read from the name itself: no hashing.
 */
export class NameFilter {
  readonly #bits: Uint32Array
  readonly #mask: number

  /** `log2Bits` bits in all (23, the default: 8 Mi bits, 1 MiB). */
  constructor(log2Bits = DEFAULT_LOG2_BITS) {
    if (!Number.isInteger(log2Bits) || log2Bits < 5 || log2Bits > MAX_LOG2_BITS)
      throw new RangeError(`log2Bits must be an integer from 5 to ${MAX_LOG2_BITS}`)
    this.#bits = new Uint32Array(2 ** (log2Bits - 5))
    this.#mask = 2 ** log2Bits - 1
  }

  /** What the filter weighs, in bytes (fixed). */
  get bytes(): number {
    return this.#bits.byteLength
  }

  add(name: string): void {
    for (let i = 0; i < PROBES; i += 1) {
      const bit = this.#position(name, i)
      const word = bit >>> 5
      this.#bits[word] = (this.#bits[word] ?? 0) | (1 << (bit & 31))
    }
  }

  /** False only when the name was never added. */
  mightHold(name: string): boolean {
    for (let i = 0; i < PROBES; i += 1) {
      const bit = this.#position(name, i)
      if (((this.#bits[bit >>> 5] ?? 0) & (1 << (bit & 31))) === 0) return false
    }
    return true
  }

  /** The i-th probe's bit: 7 hex digits (28 bits) of the name, masked to the filter's size. */
  #position(name: string, i: number): number {
    const value = Number.parseInt(name.slice(i * 7, i * 7 + 7), 16)
    if (!Number.isInteger(value)) throw new RangeError(`not a hex digest name: ${name}`)
    return value & this.#mask
  }
}

/** Probes per name: with 2^23 bits, 100,000 names give about 1 false positive in 10^6. */
const PROBES = 5
/** 8 Mi bits, 1 MiB. */
const DEFAULT_LOG2_BITS = 23
/** 28 bits are read from the name per probe. */
const MAX_LOG2_BITS = 28
