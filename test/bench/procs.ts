// Child-process bookkeeping for the benchmark: every child is tracked and killed on
// exit (normal, error or signal); the temp root is removed at the same time.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'

const children = new Set<ChildProcess>()
let tempRoot: string | undefined

export const track = <T extends ChildProcess>(child: T): T => {
  children.add(child)
  child.on('exit', () => children.delete(child))
  return child
}

/** One temp root for the whole run; everything the bench writes goes below it. */
export const makeTempRoot = (): string => {
  tempRoot = mkdtempSync(join(process.env.BENCH_TMPDIR ?? tmpdir(), 'user-service-bench-'))
  return tempRoot
}

const cleanupSync = (): void => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
  children.clear()
  if (tempRoot !== undefined) {
    rmSync(tempRoot, { recursive: true, force: true })
    tempRoot = undefined
  }
}

export const installCleanup = (): void => {
  process.on('exit', cleanupSync)
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      process.stderr.write(`\n${signal}: stopping children and removing temp files\n`)
      cleanupSync()
      process.exit(130)
    })
  }
}

/**
 * What every benchmarked service runs with: the defaults operators run (a JSON line per request,
 * metrics counted), with the overload limits raised out of the load's way.
 */
export const SERVICE_BENCH_ENV = {
  LOG_LEVEL: 'info',
  METRICS: 'on',
  MAX_INFLIGHT: '100000',
  MAX_EVENT_LOOP_DELAY_MS: '100000',
} as const

/**
 * The environment of a benchmarked service (dist/bin.js) signing with `secret`, on port 0 of
 * loopback, one process, on the file store in `dataDir` even when DATABASE_URL is set for the
 * PostgreSQL cases; `extra` comes last.
 */
export const benchServiceEnv = (
  secret: string,
  dataDir: string,
  extra: NodeJS.ProcessEnv = {},
): NodeJS.ProcessEnv => ({
  ...process.env,
  PORT: '0',
  HOST: '127.0.0.1',
  DATA_DIR: dataDir,
  JWT_SECRET: secret,
  DATABASE_URL: undefined,
  WORKERS: undefined,
  ...SERVICE_BENCH_ENV,
  ...extra,
})

export interface Server {
  name: string
  child: ChildProcess
  pid: number
  url: string
  /** ms from spawn to the first 200 of /readyz (or to the listening line if no readiness check). */
  startMs: number
  stderrTail: () => string
}

export interface StartOptions {
  name: string
  command: string
  args: string[]
  env?: NodeJS.ProcessEnv
  cwd?: string
  /** Poll GET <url>/readyz until 200. */
  readyz: boolean
  timeoutMs?: number
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

export const startServer = async (opts: StartOptions): Promise<Server> => {
  const timeoutMs = opts.timeoutMs ?? 60_000
  const t0 = performance.now()
  const child = track(
    spawn(opts.command, opts.args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  )
  const pid = child.pid
  if (pid === undefined) throw new Error(`${opts.name}: spawn failed`)
  let stderr = ''
  child.stderr?.setEncoding('utf8').on('data', (s: string) => {
    stderr = (stderr + s).slice(-4000)
  })
  const stderrTail = (): string => stderr.trim()

  let exited = false
  const exitedPromise = new Promise<never>((_resolve, reject) => {
    child.on('exit', (code, signal) => {
      exited = true
      reject(
        new Error(
          `${opts.name} exited early (code ${String(code)}, signal ${String(signal)}):\n${stderrTail()}`,
        ),
      )
    })
  })
  exitedPromise.catch(() => undefined)

  const stdout = child.stdout
  if (stdout === null) throw new Error(`${opts.name}: no stdout`)
  const listening = new Promise<string>((resolve) => {
    const lines = createInterface({ input: stdout })
    lines.on('line', (line) => {
      let parsed: unknown
      try {
        parsed = JSON.parse(line)
      } catch {
        return
      }
      if (
        typeof parsed === 'object' &&
        parsed !== null &&
        'msg' in parsed &&
        'url' in parsed &&
        parsed.msg === 'listening' &&
        typeof parsed.url === 'string'
      ) {
        resolve(parsed.url)
        // Later lines (request logs at LOG_LEVEL=info) are read and thrown away unparsed, so
        // that the service writes at full speed and the bench spends no CPU on them.
        lines.close()
        stdout.resume()
      }
    })
  })
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${opts.name}: not ready after ${timeoutMs} ms:\n${stderrTail()}`)),
      timeoutMs,
    )
  })
  try {
    const url = await Promise.race([listening, exitedPromise, timeout])
    if (opts.readyz) {
      const poll = async (): Promise<void> => {
        for (;;) {
          if (exited) return
          const res = await fetch(`${url}/readyz`).catch(() => undefined)
          if (res !== undefined) {
            await res.arrayBuffer()
            if (res.status === 200) return
          }
          await sleep(5)
        }
      }
      await Promise.race([poll(), exitedPromise, timeout])
    }
    return { name: opts.name, child, pid, url, startMs: performance.now() - t0, stderrTail }
  } catch (err) {
    child.kill('SIGKILL')
    throw err
  } finally {
    clearTimeout(timer)
  }
}

export const stopServer = async (server: Server): Promise<void> => {
  const { child } = server
  if (child.exitCode !== null || child.signalCode !== null) return
  const done = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
  await done
  clearTimeout(timer)
}

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ: 100 on Linux everywhere). */
const CLOCK_TICKS = 100

/** CPU time (user + system) a process has used so far, in seconds, from /proc/<pid>/stat. */
export const cpuSeconds = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // The command name, field 2, is in parentheses and may hold spaces: count after its last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const utime = Number(fields[11])
  const stime = Number(fields[12])
  if (!Number.isFinite(utime) || !Number.isFinite(stime))
    throw new Error(`no CPU times for pid ${pid}`)
  return (utime + stime) / CLOCK_TICKS
}

/** The pids of a process's children, forked by any of its threads. */
const childPids = (pid: number): number[] => {
  const pids: number[] = []
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    const text = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim()
    if (text !== '') for (const child of text.split(' ')) pids.push(Number(child))
  }
  return pids
}

/**
 * CPU time of a process and of its living descendants (a primary and its cluster workers), in
 * seconds. A descendant that exits between two readings takes its time with it: the workers of a
 * case live as long as the case.
 */
export const treeCpuSeconds = (pid: number): number => {
  let total = cpuSeconds(pid)
  for (const child of childPids(pid)) {
    try {
      total += treeCpuSeconds(child)
    } catch {
      // Gone since it was listed.
    }
  }
  return total
}

/** Resident set size of a process in MB (VmRSS from /proc/<pid>/status). */
export const rssMb = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)
  if (match?.[1] === undefined) throw new Error(`no VmRSS for pid ${pid}`)
  return Number(match[1]) / 1024
}
