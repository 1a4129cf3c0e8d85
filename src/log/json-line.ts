/** The fields a log line carries beside its time, level and message. */
export type LogFields = Readonly<Record<string, unknown>>

/** One log line: a JSON object and a newline. It never throws, whatever the fields hold. */
export function formatLine(time: string, level: string, msg: string, fields?: LogFields): string {
  try {
    return `${JSON.stringify({ time, level, msg, ...fields })}\n`
  } catch (error) {
    // A BigInt, a cycle or a throwing getter in the fields must not make logging throw.
    const reason = error instanceof Error ? error.message : 'unknown'
    const logError = `fields not serializable: ${reason}`
    return `${JSON.stringify({ time, level, msg, logError })}\n`
  }
}

// Every surrogate takes the slow path, paired or not: rare in logged values, and always right.
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/

/** A string as JSON, as JSON.stringify writes it, without calling it for plain text. */
export function toJsonString(value: string): string {
  return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`
}

/** A number as JSON.stringify writes it: `null` for NaN and the infinities. */
export function toJsonNumber(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null'
}

/** The ISO time of each line, formatted once per millisecond. */
export function createIsoClock(now: (() => Date) | undefined): () => string {
  const read = now === undefined ? Date.now : () => now().getTime()
  let lastMs = Number.NaN
  let lastIso = ''
  return () => {
    const ms = read()
    if (ms !== lastMs) {
      lastMs = ms
      const date = new Date(ms)
      lastIso = Number.isNaN(date.getTime()) ? 'Invalid Date' : date.toISOString()
    }
    return lastIso
  }
}
