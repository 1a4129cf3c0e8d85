/** The parsers of src/settings.ts: each turns a variable's text into a value or throws ConfigError. */
import { isIP } from 'node:net'
import { availableParallelism } from 'node:os'

import { createSingleKeySet, KeyError, type KeySet, parseKeyList } from './auth/keys.js'
import { parseNetwork } from './domain/ip-networks.js'
import { parseTrustedProxies, TrustedProxyError } from './http/client-address.js'
import { CorsConfigError, type CorsOrigins, parseCorsOrigins } from './http/cors.js'
import type { RateLimitPolicy } from './http/rate-limiter.js'
import { LOG_LEVELS, type LogLevel } from './log/logger.js'

/** A value that cannot be used; the message starts with the variable's name. */
export class ConfigError extends Error {
  override name = 'ConfigError'
}

export function integer(min: number, max: number): (text: string, name: string) => number {
  return (text, name) => {
    if (!/^\d+$/.test(text)) throw new ConfigError(`${name} must be a whole number, got "${text}"`)
    const value = Number(text)
    if (value < min || value > max) {
      throw new ConfigError(`${name} must be between ${min} and ${max}, got ${text}`)
    }
    return value
  }
}

const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/

export function parseHost(text: string, name: string): string {
  if (isIP(text) !== 0 || HOSTNAME.test(text)) return text
  throw new ConfigError(`${name} must be an IP address or a host name, got "${text}"`)
}

export function parseBasePath(text: string, name: string): string {
  if (text === '/') return ''
  if (!/^(\/[A-Za-z0-9._~-]+)+\/?$/.test(text)) {
    throw new ConfigError(`${name} must look like /v1 (segments of [A-Za-z0-9._~-]), got "${text}"`)
  }
  // Clients and proxies resolve `.` and `..` before they send a path, so routes under such a base
  // could be reached only by a client told not to.
  if (text.split('/').some((segment) => segment === '.' || segment === '..')) {
    throw new ConfigError(`${name} must not hold a . or .. segment, got "${text}"`)
  }
  return text.endsWith('/') ? text.slice(0, -1) : text
}

/** The URL is never echoed: it may hold a password. */
export function parseDatabaseUrl(text: string, name: string): string | undefined {
  let protocol: string | undefined
  try {
    protocol = new URL(text).protocol
  } catch {
    protocol = undefined
  }
  if (protocol !== 'postgres:' && protocol !== 'postgresql:') {
    throw new ConfigError(`${name} must be a postgres:// or postgresql:// URL`)
  }
  return text
}

const wholeWorkers = integer(1, 1024)

export function parseWorkers(text: string, name: string): number {
  return text.toLowerCase() === 'auto' ? availableParallelism() : wholeWorkers(text, name)
}

export function parseOnOff(text: string, name: string): boolean {
  const value = text.toLowerCase()
  if (value === 'on') return true
  if (value === 'off') return false
  throw new ConfigError(`${name} must be on or off, got "${text}"`)
}

export function parseLogLevel(text: string, name: string): LogLevel {
  const level = LOG_LEVELS.find((candidate) => candidate === text.toLowerCase())
  if (level === undefined) {
    throw new ConfigError(`${name} must be one of ${LOG_LEVELS.join(', ')}, got "${text}"`)
  }
  return level
}

/** JWT_SECRETS is a list of kid=secret; JWT_SECRET one secret. */
export function parseKeys(text: string, name: string): KeySet | undefined {
  try {
    return name === 'JWT_SECRETS' ? parseKeyList(text) : createSingleKeySet(text)
  } catch (error) {
    if (error instanceof KeyError) throw new ConfigError(error.message)
    throw error
  }
}

export function parseCors(text: string, name: string): CorsOrigins | undefined {
  try {
    return parseCorsOrigins(text)
  } catch (error) {
    if (error instanceof CorsConfigError) throw new ConfigError(`${name}: ${error.message}`)
    throw error
  }
}

/** A comma list's text, for a list given as an embedding option (settings' `toText`). */
export function listText(values: readonly unknown[]): string {
  return values.join(',')
}

/** A rate limit's text, `Q/W` or `off`, for a policy given as an embedding option. */
export function rateLimitText(policy: RateLimitPolicy | undefined): string {
  return policy === undefined ? 'off' : `${policy.quota}/${policy.windowSeconds}`
}

/** `Q/W` (Q requests per W seconds) or `off`. */
export function parseRateLimit(text: string, name: string): RateLimitPolicy | undefined {
  if (text.toLowerCase() === 'off') return undefined
  const match = /^(\d+)\/(\d+)$/.exec(text)
  const quota = Number(match?.[1])
  const windowSeconds = Number(match?.[2])
  if (
    match === null ||
    quota < 1 ||
    quota > 1_000_000 ||
    windowSeconds < 1 ||
    windowSeconds > 86_400
  ) {
    throw new ConfigError(
      `${name} must be off or Q/W (1 ≤ Q ≤ 1000000 requests per 1 ≤ W ≤ 86400 seconds), got "${text}"`,
    )
  }
  return { quota, windowSeconds }
}

export function parseProxies(text: string, name: string): readonly string[] {
  try {
    return parseTrustedProxies(text)
  } catch (error) {
    if (error instanceof TrustedProxyError) throw new ConfigError(`${name}: ${error.message}`)
    throw error
  }
}

function commaList(text: string): string[] {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
}

/** `WEBHOOK_ALLOW_NETWORKS`: a comma list of CIDR blocks (or lone addresses), IPv4 or IPv6. */
export function parseNetworks(text: string, name: string): readonly string[] {
  const entries = commaList(text)
  for (const entry of entries) {
    if (parseNetwork(entry) === undefined) {
      throw new ConfigError(`${name}: "${entry}" is not a CIDR block such as 10.20.0.0/16`)
    }
  }
  return entries
}

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }
const MAX_DELAY_MS = 24 * 3_600_000
const MAX_DELAYS = 20

/** The schedule's text, each delay in ms, for a schedule given as an embedding option. */
export function retryScheduleText(delays: readonly number[]): string {
  return delays.map((delay) => `${delay}ms`).join(',')
}

/** `WEBHOOK_RETRY_SCHEDULE`: 1–20 delays such as `5s,5m,2h`, each 1 ms to 24 h, in ms. */
export function parseRetrySchedule(text: string, name: string): readonly number[] {
  // An empty entry is most likely a delay lost in editing: refused rather than passed over.
  if (text.trim() !== '' && text.split(',').some((part) => part.trim() === '')) {
    throw new ConfigError(`${name}: "${text}" has an empty entry; list delays such as 5s,5m,30m`)
  }
  const delays = commaList(text).map((entry) => {
    const match = /^(\d{1,9})(ms|s|m|h)$/.exec(entry)
    const delay = Number(match?.[1]) * (UNIT_MS[match?.[2] ?? ''] ?? Number.NaN)
    if (!(delay >= 1 && delay <= MAX_DELAY_MS)) {
      throw new ConfigError(
        `${name}: "${entry}" is not a delay of 1ms to 24h (an integer and ms, s, m or h)`,
      )
    }
    return delay
  })
  if (delays.length < 1 || delays.length > MAX_DELAYS) {
    throw new ConfigError(`${name} must list 1 to ${MAX_DELAYS} delays, got ${delays.length}`)
  }
  return delays
}
