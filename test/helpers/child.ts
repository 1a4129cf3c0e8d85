import { type ChildProcess, spawn } from 'node:child_process'

import { serviceScript } from './child-scripts.js'
import { PROJECT_ROOT } from './project-root.js'
import { TEST_SECRET } from './tokens.js'

export { PROJECT_ROOT }

/** Variables of the service that must not leak in from the shell running the tests. */
const SERVICE_VARS = [
  'PORT',
  'HOST',
  'DATA_DIR',
  'BASE_PATH',
  'JWT_SECRET',
  'JWT_SECRETS',
  'JWT_ISSUER',
  'JWT_AUDIENCE',
  'JWT_LEEWAY_S',
  'LOG_LEVEL',
  'MAX_INFLIGHT',
  'MAX_EVENT_LOOP_DELAY_MS',
  'NODE_ENV',
  'HEADERS_TIMEOUT_MS',
  'REQUEST_TIMEOUT_MS',
  'KEEP_ALIVE_TIMEOUT_MS',
  'SHUTDOWN_TIMEOUT_MS',
  'NODE_TEST_CONTEXT',
  'MAX_CONNECTIONS',
  'LIST_SCAN_BUDGET',
  'METRICS',
  'DATABASE_URL',
  'WORKERS',
  'CORS_ORIGINS',
  'MAX_EVENT_STREAMS',
  'EVENTS_RETENTION_DAYS',
  'CHECKPOINT_MS',
  'IMPORT_MAX_BYTES',
  'DATABASE_STATEMENT_TIMEOUT_MS',
  'DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS',
  'FEED_STALL_WARN_MS',
  'RATE_LIMIT_SUBJECT',
  'RATE_LIMIT_ADDRESS',
  'RATE_LIMIT_MAX_CLIENTS',
  'TRUSTED_PROXIES',
]

export interface ChildOptions {
  dataDir: string
  /** Extra variables; undefined removes one. JWT_SECRET is TEST_SECRET unless set here. */
  env?: Record<string, string | undefined>
  /** The arguments of node (default: the compiled service, `serviceScript()`, which serves). */
  args?: readonly string[]
  cwd?: string
  /** Runs the child as this user and group (the caller must be root), with no other groups. */
  user?: { readonly uid: number; readonly gid: number } | undefined
  /** Runs the child as the leader of a process group of its own, which a test may signal whole. */
  detached?: boolean
  /** A command that runs node, given first (`unshare …`): the child is then that command's. */
  wrapper?: readonly string[]
}

export interface Child {
  readonly proc: ChildProcess
  stdout(): string
  stderr(): string
  /** Resolves with the exit code and signal. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** The event-loop delay past which a test's service sheds load, unless its test says otherwise. */
export const TEST_MAX_EVENT_LOOP_DELAY_MS = '60000'

/** Runs the service (or another script) as a child process with a clean environment. */
export function spawnService(options: ChildOptions): Child {
  const env: Record<string, string | undefined> = { ...process.env }
  for (const name of SERVICE_VARS) delete env[name]
  Object.assign(
    env,
    {
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: options.dataDir,
      JWT_SECRET: TEST_SECRET,
      // A busy CI machine can stall a child's event loop past the 1 s default, and its answers
      // would turn into 503 overloaded: only the tests of that refusal (which set it) want it.
      MAX_EVENT_LOOP_DELAY_MS: TEST_MAX_EVENT_LOOP_DELAY_MS,
    },
    options.env,
  )
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete env[name]
  const args = options.args ?? [serviceScript()]
  const [command = process.execPath, ...before] = options.wrapper ?? []
  const nodeArgs = options.wrapper === undefined ? args : [process.execPath, ...args]
  const proc = spawn(command, [...before, ...nodeArgs], {
    cwd: options.cwd ?? PROJECT_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached === true,
    // libuv drops the supplementary groups when it sets the ids.
    ...(options.user === undefined ? {} : { uid: options.user.uid, gid: options.user.gid }),
  })
  let out = ''
  let err = ''
  proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
  })
  proc.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.on('exit', (code, signal) => {
      resolve({ code, signal })
    })
  })
  return { proc, stdout: () => out, stderr: () => err, exited }
}

export interface RunningChild extends Child {
  readonly url: string
  /** SIGTERM (or another signal) and the exit. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Starts the service as a child and waits for its listening line and a 200 from /readyz. */
export async function startChild(options: ChildOptions, timeoutMs = 15_000): Promise<RunningChild> {
  const child = spawnService(options)
  const deadline = Date.now() + timeoutMs
  let url: string | undefined
  while (url === undefined) {
    url = /"msg":"listening","url":"([^"]+)"/.exec(child.stdout())?.[1]
    if (url !== undefined) break
    if (child.proc.exitCode !== null || Date.now() > deadline) {
      child.proc.kill('SIGKILL')
      throw new Error(`the service did not start:\n${child.stderr()}\n${child.stdout()}`)
    }
    await sleep(20)
  }
  while (
    (await fetch(`${url}/readyz`).then(
      (res) => res.status,
      () => 0,
    )) !== 200
  ) {
    if (Date.now() > deadline) throw new Error(`the service never became ready:\n${child.stderr()}`)
    await sleep(20)
  }
  const found = url
  return {
    ...child,
    url: found,
    async stop(signal = 'SIGTERM') {
      if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill(signal)
      return child.exited
    },
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** The file store's last log line of a load: the lines logged before it are out when it is. */
export const LOADED_LINE = '"msg":"events loaded"'

/**
 * Waits until the child printed `text` (or fails when it exits first). The service writes its log
 * lines in batches, so a line logged before /readyz said 200 may still be on its way.
 */
export async function waitForOutput(child: Child, text: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!child.stdout().includes(text)) {
    if (exited(child) || Date.now() > deadline)
      throw new Error(`no ${JSON.stringify(text)} from the child:\n${child.stderr()}`)
    await sleep(5)
  }
}

/** Whether the child is gone (a signal leaves `exitCode` null). */
export function exited(child: Child): boolean {
  return child.proc.exitCode !== null || child.proc.signalCode !== null
}
