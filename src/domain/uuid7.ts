import { randomFillSync } from 'node:crypto'

/** Canonical lower-case UUID text, any version. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

export function isCanonicalUuid(text: string): boolean {
  return text.length === 36 && UUID_PATTERN.test(text)
}

/**
 * Random bytes drawn from a pool filled 4 KiB at a time: one call to the CSPRNG per few hundred
 * ids instead of two per id (an import makes tens of thousands a second). The bytes are as random;
 * they are copied out before the pool is filled again.
 */
const pool = Buffer.alloc(4096)
let pooled = 0

function randomBytes(count: number): Buffer {
  if (pooled < count) {
    randomFillSync(pool)
    pooled = pool.length
  }
  pooled -= count
  return pool.subarray(pooled, pooled + count)
}

/** Makes UUIDv7 ids (RFC 9562) that strictly increase within the process, even within one ms. */
export type IdGenerator = (nowMs: number) => { id: string; ms: number }

export function createIdGenerator(): IdGenerator {
  let lastMs = -1
  let counter = 0
  return (nowMs) => {
    let ms = Math.max(Math.floor(nowMs), lastMs)
    if (ms === lastMs) {
      counter += 1
      // 12 bits of counter (rand_a); on overflow borrow the next millisecond (RFC 9562 §6.2).
      if (counter > 0xfff) {
        ms += 1
        counter = randomBytes(1)[0] ?? 0
      }
    } else {
      // Start low in the 12-bit space, leaving room to count up within the millisecond.
      counter = randomBytes(1)[0] ?? 0
    }
    lastMs = ms
    return { id: formatUuid7(ms, counter, randomBytes(8)), ms }
  }
}

function formatUuid7(ms: number, counter: number, random: Buffer): string {
  const bytes = Buffer.alloc(16)
  bytes.writeUIntBE(ms, 0, 6)
  bytes[6] = 0x70 | ((counter >> 8) & 0x0f)
  bytes[7] = counter & 0xff
  random.copy(bytes, 8)
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f)
  const hex = bytes.toString('hex')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

/**
 * The milliseconds a canonical UUIDv7 carries (its first 48 bits), or undefined when the UUID is
 * not version 7 with the RFC 9562 variant (the nil UUID, a v4).
 */
export function uuid7Ms(id: string): number | undefined {
  if (id[14] !== '7' || !'89ab'.includes(id[19] ?? '')) return undefined
  return Number.parseInt(`${id.slice(0, 8)}${id.slice(9, 13)}`, 16)
}
