// Runs wrk (one thread, loopback, bounded duration) and parses its report.
import { spawn, spawnSync } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'

import { track } from './procs.js'

export interface WrkResult {
  rps: number
  p50Ms: number
  p99Ms: number
  requests: number
  /** Responses with a status >= 400 ("Non-2xx or 3xx responses") plus socket errors. */
  errors: number
  non2xx: number
  socketErrors: number
}

export const ensureWrk = (): void => {
  const found = spawnSync('which', ['wrk'], { stdio: 'ignore' })
  if (found.status !== 0) {
    process.stderr.write('wrk is not installed: apt-get install -y wrk\n')
    process.exit(1)
  }
}

/** A Lua string literal for ASCII text (LuaJIT has no \u escapes, so use \ddd). */
export const luaString = (s: string): string => {
  let out = '"'
  for (const ch of s) {
    const code = ch.codePointAt(0) ?? 0
    if (ch === '"' || ch === '\\') out += `\\${ch}`
    else if (code < 0x20 || code > 0x7e) {
      for (const byte of Buffer.from(ch)) out += `\\${byte}`
    } else out += ch
  }
  return `${out}"`
}

export const luaHeaders = (headers: Record<string, string>): string =>
  `{ ${Object.entries(headers)
    .map(([k, v]) => `[${luaString(k)}] = ${luaString(v)}`)
    .join(', ')} }`

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

const toMs = (value: string, unit: string): number => {
  const factor = UNIT_MS[unit]
  if (factor === undefined) throw new Error(`wrk: unknown time unit ${unit}`)
  return Number(value) * factor
}

export const parseWrk = (output: string): WrkResult => {
  const rps = /^Requests\/sec:\s+([\d.]+)/m.exec(output)
  const p50 = /^\s+50%\s+([\d.]+)(us|ms|s|m|h)\s*$/m.exec(output)
  const p99 = /^\s+99%\s+([\d.]+)(us|ms|s|m|h)\s*$/m.exec(output)
  const requests = /^\s+(\d+) requests in /m.exec(output)
  if (
    rps?.[1] === undefined ||
    p50?.[1] === undefined ||
    p50[2] === undefined ||
    p99?.[1] === undefined ||
    p99[2] === undefined ||
    requests?.[1] === undefined
  ) {
    throw new Error(`cannot parse wrk output:\n${output}`)
  }
  const non2xx = Number(/^\s+Non-2xx or 3xx responses:\s+(\d+)/m.exec(output)?.[1] ?? 0)
  const sock = /^\s+Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/m.exec(
    output,
  )
  const socketErrors = sock === null ? 0 : sock.slice(1).reduce((sum, n) => sum + Number(n), 0)
  return {
    rps: Number(rps[1]),
    p50Ms: toMs(p50[1], p50[2]),
    p99Ms: toMs(p99[1], p99[2]),
    requests: Number(requests[1]),
    errors: non2xx + socketErrors,
    non2xx,
    socketErrors,
  }
}

export interface WrkOptions {
  url: string
  /** Lua script source; written to a file in `tmpDir`. */
  script: string
  tmpDir: string
  durationS: number
  connections: number
}

let scriptCounter = 0

export const runWrk = async (opts: WrkOptions): Promise<WrkResult> => {
  const scriptPath = join(opts.tmpDir, `wrk-${process.pid}-${++scriptCounter}.lua`)
  await writeFile(scriptPath, opts.script)
  const args = [
    '-t1',
    `-c${opts.connections}`,
    `-d${opts.durationS}s`,
    '--timeout',
    '10s',
    '--latency',
    '-s',
    scriptPath,
    opts.url,
  ]
  const child = track(spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] }))
  let out = ''
  let err = ''
  child.stdout.setEncoding('utf8').on('data', (s: string) => {
    out += s
  })
  child.stderr.setEncoding('utf8').on('data', (s: string) => {
    err += s
  })
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', resolve)
  })
  if (code !== 0) throw new Error(`wrk exited with ${String(code)}: ${err}${out}`)
  return parseWrk(out)
}
