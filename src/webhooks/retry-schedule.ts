/**
 * When a failed webhook attempt is tried again (docs/configuration.md, WEBHOOK_RETRY_SCHEDULE):
 * the schedule's next delay lengthened by up to 10 % at random, so that endpoints failing together
 * do not retry together, or a receiver's longer `Retry-After` up to an hour.
 */

/** The longest `Retry-After` obeyed: a receiver cannot park an endpoint for a day. */
export const RETRY_AFTER_CAP_SECONDS = 3600
const JITTER = 0.1

/**
 * The wait (ms) before the attempt that follows failed attempt number `failedAttempt` (from 1) of
 * an event, or undefined when that was the last the schedule allows (the endpoint is then
 * disabled). `random` gives [0, 1); `retryAfterSeconds` is the answer's, on a 429 or 503.
 */
export function retryDelayMs(
  schedule: readonly number[],
  failedAttempt: number,
  random: () => number,
  retryAfterSeconds?: number,
): number | undefined {
  const delay = schedule[failedAttempt - 1]
  if (delay === undefined) return undefined
  const jittered = Math.round(delay * (1 + JITTER * random()))
  if (retryAfterSeconds === undefined) return jittered
  return Math.max(jittered, Math.min(retryAfterSeconds, RETRY_AFTER_CAP_SECONDS) * 1000)
}

/**
 * A `Retry-After` header in seconds (the only form obeyed), on a 429 or 503 answer; undefined for
 * any other status, a date, or anything malformed.
 */
export function parseRetryAfter(status: number, header: string | undefined): number | undefined {
  if (status !== 429 && status !== 503) return undefined
  if (header === undefined || !/^\s*\d+\s*$/.test(header)) return undefined
  // Any run of digits is a delay: one too long for a number is still longer than the cap.
  return Math.min(Number(header), RETRY_AFTER_CAP_SECONDS)
}
