import { randomBytes } from 'node:crypto'
import { Worker } from 'node:worker_threads'

import { WriteError, type WriteStep } from '../write-error.js'

/**
 * The thread's code: the files of a batch written durably with synchronous calls, 64 at a time:
 * each temp file opened exclusively, written and renamed over its target, then each fsynced and
 * closed (fsyncs one after another of files already written share the journal's work: about five
 * times the rate of a write and fsync per file here), then one answer for the batch. The caller
 * claims nothing before the answer, so a file renamed before its fsync is as any change's file
 * past the checkpoint. Temp files are named like DurableDirectory's, so that a start removes
 * those a crash left.
 */
const SOURCE = `
const { parentPort } = require('node:worker_threads')
const fs = require('node:fs')
const GROUP = 64
let count = 0
parentPort.on('message', ({ dir, prefix, files }) => {
  let done = 0
  let step = 'write'
  let temp
  const open = []
  try {
    for (let at = 0; at < files.length; at += GROUP) {
      for (const [name, json] of files.slice(at, at + GROUP)) {
        count += 1
        temp = dir + '/.' + name + '.' + prefix + count.toString(36) + '.tmp'
        step = 'write'
        const fd = fs.openSync(temp, 'wx', 0o600)
        open.push(fd)
        fs.writeFileSync(fd, json)
        step = 'rename'
        fs.renameSync(temp, dir + '/' + name)
        temp = undefined
      }
      step = 'file-sync'
      while (open.length > 0) {
        const fd = open.shift()
        try {
          fs.fsyncSync(fd)
        } finally {
          fs.closeSync(fd)
        }
        done += 1
      }
    }
    parentPort.postMessage({ done })
  } catch (error) {
    if (temp !== undefined) try { fs.unlinkSync(temp) } catch {}
    for (const fd of open) try { fs.closeSync(fd) } catch {}
    parentPort.postMessage({ done, step, code: error && error.code, message: String(error && error.message) })
  }
})
`

interface Answer {
  readonly done: number
  readonly step?: WriteStep
  readonly code?: string
  readonly message?: string
}

/** Files per message to a thread. */
const CHUNK = 1024
/** Threads writing at once: their fsyncs, in flight together, share the journal's commits. */
const THREADS = 2
/** A thread idle this long is ended (it holds several MB). */
const IDLE_MS = 5000

/**
 * Writes many files durably on two threads of its own, a batch per message: the event loop pays
 * one message per 1,024 files rather than five trips to libuv's pool per file, and the pool stays
 * free for the event log's fdatasync. The threads start with the first batch and end when idle.
 */
export class OwedWriter {
  readonly #workers: (Worker | undefined)[] = Array.from({ length: THREADS }, () => undefined)
  #idle: NodeJS.Timeout | undefined
  readonly #prefix = randomBytes(6).toString('hex')

  /**
   * Writes each [name, content] into `dir` (temp file, rename, then its fsync: the caller claims
   * nothing before this resolves); the directory is left to the caller to fsync. Rejects with a WriteError at the first that fails (those
   * before it are written).
   */
  async write(dir: string, files: readonly (readonly [string, string])[]): Promise<void> {
    clearTimeout(this.#idle)
    const chunks: (readonly (readonly [string, string])[])[] = []
    for (let at = 0; at < files.length; at += CHUNK) chunks.push(files.slice(at, at + CHUNK))
    const failures: unknown[] = []
    const thread = async (slot: number): Promise<void> => {
      for (let chunk = chunks.shift(); chunk !== undefined; chunk = chunks.shift()) {
        if (failures.length > 0) return
        await this.#send(slot, dir, chunk).catch((error: unknown) => {
          failures.push(error)
        })
      }
    }
    try {
      // Every thread has stopped writing when this settles, failed or not.
      await Promise.all(this.#workers.map((_, slot) => thread(slot)))
      if (failures.length > 0) throw failures[0]
    } finally {
      this.#idle = setTimeout(() => {
        void this.close()
      }, IDLE_MS)
      this.#idle.unref()
    }
  }

  #send(slot: number, dir: string, files: readonly (readonly [string, string])[]): Promise<void> {
    const worker = this.#start(slot)
    return new Promise((resolve, reject) => {
      const done = (): void => {
        worker.unref()
        worker.off('message', onMessage)
        worker.off('error', onError)
        worker.off('exit', onExit)
      }
      const onMessage = (answer: Answer): void => {
        done()
        if (answer.step === undefined) resolve()
        else {
          const cause = Object.assign(new Error(answer.message), { code: answer.code })
          reject(new WriteError(answer.step, cause, false))
        }
      }
      const onError = (error: unknown): void => {
        done()
        if (this.#workers[slot] === worker) this.#workers[slot] = undefined
        reject(new WriteError('write', error, false))
      }
      const onExit = (): void => {
        onError(new Error('the file writer thread ended'))
      }
      worker.on('message', onMessage)
      worker.on('error', onError)
      worker.on('exit', onExit)
      // Alive while a batch runs (a last checkpoint at a stop may be all that is left to do).
      worker.ref()
      worker.postMessage({ dir, prefix: `${this.#prefix}${slot}`, files })
    })
  }

  #start(slot: number): Worker {
    const running = this.#workers[slot]
    if (running !== undefined) return running
    const worker = new Worker(SOURCE, { eval: true })
    // Idle, it never keeps the process alive.
    worker.unref()
    this.#workers[slot] = worker
    return worker
  }

  /** Ends the threads (a batch running is cut short: its caller is told by an error). */
  async close(): Promise<void> {
    clearTimeout(this.#idle)
    const workers = [...this.#workers]
    this.#workers.fill(undefined)
    await Promise.all(workers.map((worker) => worker?.terminate()))
  }
}
