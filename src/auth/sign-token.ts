import { createHmac } from 'node:crypto'

import type { HmacKey } from './keys.js'
import { HMAC_ALGORITHMS, type HmacAlgorithm } from './verify-token.js'

export interface SignOptions {
  key: HmacKey
  alg?: HmacAlgorithm
}

/** Signs claims as a compact JWS; the key's `kid`, when it has one, goes into the header. */
export function signToken(claims: Readonly<Record<string, unknown>>, options: SignOptions): string {
  const alg = options.alg ?? 'HS256'
  const header =
    options.key.kid === undefined ? { alg, typ: 'JWT' } : { alg, typ: 'JWT', kid: options.key.kid }
  const input = `${encodeJson(header)}.${encodeJson(claims)}`
  const signature = createHmac(HMAC_ALGORITHMS[alg], options.key.secret)
    .update(input)
    .digest('base64url')
  return `${input}.${signature}`
}

function encodeJson(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url')
}

const DURATION = /^(\d+)(s|m|h|d)?$/
const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86_400 } as const
/** Ten years: a token that outlives its keys' rotation by decades is a mistake, not a choice. */
const MAX_DURATION_S = 3650 * 86_400

/** Parses `90`, `90s`, `15m`, `1h` or `7d` into seconds; throws on anything else. */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text.trim())
  if (match === null || match[1] === undefined)
    throw new Error(`not a duration: "${text}" (try 1h)`)
  const unit = (match[2] ?? 's') as keyof typeof UNIT_SECONDS
  const seconds = Number(match[1]) * UNIT_SECONDS[unit]
  if (seconds <= 0) throw new Error(`a duration must be positive: "${text}"`)
  if (seconds > MAX_DURATION_S) throw new Error(`a duration is at most 3650d: "${text}"`)
  return seconds
}
