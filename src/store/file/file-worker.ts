import { Worker } from 'node:worker_threads'

/** A file call the worker makes: a new file written whole (exclusive), a rename, an unlink. */
export type FileCall =
  | { readonly call: 'write'; readonly path: string; readonly data: string }
  | { readonly call: 'rename'; readonly path: string; readonly to: string }
  | { readonly call: 'unlink'; readonly path: string }

/** How a call failed, as node:fs says it (what crosses the thread boundary). */
interface Failure {
  readonly code: unknown
  readonly syscall: unknown
  readonly message: unknown
}

interface Waiting {
  readonly call: FileCall
  readonly resolve: () => void
  readonly reject: (error: unknown) => void
}

/**
 * The worker's whole program: the calls of each message made synchronously, in order, and one
 * answer per message. Plain JavaScript, evaluated, so that it needs no file of its own (the
 * one-file build) and no loader (tests run the sources through tsx).
 */
const PROGRAM = `
const { parentPort } = require('node:worker_threads')
const fs = require('node:fs')
parentPort.on('message', (calls) => {
  const failures = []
  for (const c of calls) {
    try {
      if (c.call === 'write') fs.writeFileSync(c.path, c.data, { flag: 'wx', mode: 0o600 })
      else if (c.call === 'rename') fs.renameSync(c.path, c.to)
      else fs.unlinkSync(c.path)
      failures.push(undefined)
    } catch (error) {
      failures.push({ code: error.code, syscall: error.syscall, message: error.message })
    }
  }
  parentPort.postMessage(failures)
})
`

/**
 * A thread that makes the file store's small file calls (write a temp file, rename, unlink) with
 * synchronous system calls, a batch per turn of the event loop: through the libuv pool each of
 * them costs the event loop a hop to a thread and back (an import writes tens of thousands of
 * files a second), here a batch costs one message each way. Reads never wait for it, and it never
 * waits for an fsync (those stay with the pool, where many run at once). Calls made in one turn go
 * in one message and are made in the order given.
 */
export class FileWorker {
  #worker: Worker | undefined
  #queue: Waiting[] = []
  /** Batches sent and not yet answered, oldest first. */
  readonly #sent: Waiting[][] = []
  #scheduled = false

  /** Starts the thread now (at open), so that the first write does not wait for it. */
  start(): void {
    this.#thread()
  }

  run(call: FileCall): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ call, resolve, reject })
      if (this.#scheduled) return
      this.#scheduled = true
      queueMicrotask(() => {
        this.#send()
      })
    })
  }

  async close(): Promise<void> {
    const worker = this.#worker
    this.#worker = undefined
    await worker?.terminate()
  }

  #send(): void {
    this.#scheduled = false
    const batch = this.#queue
    this.#queue = []
    const worker = this.#thread()
    this.#sent.push(batch)
    // Held open only while calls are out: an idle thread never keeps the process alive.
    worker.ref()
    worker.postMessage(batch.map((entry) => entry.call))
  }

  #thread(): Worker {
    if (this.#worker !== undefined) return this.#worker
    const worker = new Worker(PROGRAM, { eval: true, execArgv: [] })
    worker.unref()
    worker.on('message', (failures: readonly (Failure | undefined)[]) => {
      const batch = this.#sent.shift() ?? []
      if (this.#sent.length === 0) worker.unref()
      for (const [at, entry] of batch.entries()) {
        const failure = failures[at]
        if (failure === undefined) entry.resolve()
        else entry.reject(toError(failure))
      }
    })
    const lost = (error: unknown): void => {
      if (this.#worker === worker) this.#worker = undefined
      for (const batch of this.#sent.splice(0)) for (const entry of batch) entry.reject(error)
    }
    worker.on('error', lost)
    worker.on('exit', (code) => {
      lost(new Error(`the file worker stopped (exit code ${code})`))
    })
    this.#worker = worker
    return worker
  }
}

function toError(failure: Failure): Error {
  const error = new Error(String(failure.message)) as Error & { code?: string; syscall?: string }
  if (typeof failure.code === 'string') error.code = failure.code
  if (typeof failure.syscall === 'string') error.syscall = failure.syscall
  return error
}
