import cluster, { type Worker } from 'node:cluster'

import type { JsonLogger, Logger } from '../log/logger.js'
import { pickSettings } from '../settings-by-owner.js'
import { storeClassesFor } from '../store/create-store.js'
import { openStore } from '../store/open-store.js'
import { serveClusterSlots } from './cluster-slots.js'
import type { Config } from './config.js'
import { type ResolvedKeys, removeGeneratedSecret, resolveKeys } from './first-start.js'
import { type Launch, printFirstStart } from './first-start-message.js'
import { STOP_SIGNALS, StartSignals } from './start-signals.js'

/** The first and the longest wait before a new worker that could not start is forked again. */
const RETRY_MIN_MS = 1000
const RETRY_MAX_MS = 30_000

export interface PrimaryOptions {
  readonly workers: number
  readonly logger: Logger
  /**
   * Runs once every worker has exited after a signal: releases what the primary holds. `served`
   * says whether every worker once listened (and `listening` ran).
   */
  readonly release: (served: boolean) => Promise<void> | void
  /** Runs once, when every worker first listens, with the URL they serve. */
  readonly listening?: ((url: string) => void) | undefined
  readonly exit: (code: number) => void
}

/** True in a worker process forked by runPrimary. */
export function isClusterWorker(): boolean {
  return cluster.isWorker
}

/** True when this process should fork workers instead of serving itself. */
export function shouldFork(workers: number): boolean {
  return workers > 1 && cluster.isPrimary
}

/**
 * The primary of WORKERS > 1: it serves nothing itself. It forks the workers (they share the
 * listening port through node:cluster), forks a new one when one dies (again and again, with a
 * growing wait, while that one cannot start), and on SIGTERM, SIGINT or
 * SIGHUP passes SIGTERM on, waits for every worker to finish its requests, then exits 0. Only the
 * PostgreSQL store may run here (config.ts refuses the file store): workers share no memory.
 */
export function runPrimary(options: PrimaryOptions): void {
  const { logger } = options
  let stopping = false
  let exitCode = 0
  const listened = new Set<number>()
  let announced = false
  const fork = (): Worker => cluster.fork()
  serveClusterSlots()
  for (let i = 0; i < options.workers; i += 1) fork()
  cluster.on('listening', (worker, address) => {
    listened.add(worker.id)
    if (announced || listened.size < options.workers) return
    announced = true
    const host = address.addressType === 6 ? `[${address.address}]` : address.address
    options.listening?.(`http://${host}:${address.port}`)
  })
  // A new worker that cannot start is tried again after this, doubled at each failure in a row.
  let retryMs = RETRY_MIN_MS
  let retry: NodeJS.Timeout | undefined
  cluster.on('listening', () => {
    retryMs = RETRY_MIN_MS
  })
  cluster.on('exit', (worker, code, signal) => {
    if (!stopping && !announced && !listened.has(worker.id)) {
      // A worker of the first start that could not start (a refused configuration, no database)
      // would fail again: stop instead of forking forever.
      logger.error('a worker could not start; stopping', { pid: worker.process.pid, code, signal })
      exitCode = 1
      stop('SIGTERM')
      return
    }
    if (!stopping && !listened.has(worker.id)) {
      // A worker started in place of one that died, while the service runs: the others serve on,
      // and the database that refused it may be back in a moment.
      logger.error('a worker could not start; trying again', {
        pid: worker.process.pid,
        code,
        signal,
        inMs: retryMs,
      })
      retry = setTimeout(() => {
        retry = undefined
        if (!stopping) fork()
      }, retryMs)
      retryMs = Math.min(retryMs * 2, RETRY_MAX_MS)
      return
    }
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        void Promise.resolve(options.release(announced)).finally(() => {
          options.exit(exitCode)
        })
      }
      return
    }
    logger.error('a worker died; starting another', { pid: worker.process.pid, code, signal })
    fork()
  })
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return
    stopping = true
    clearTimeout(retry)
    logger.info('shutting down the workers', { signal })
    const workers = Object.values(cluster.workers ?? {})
    if (workers.length === 0) {
      void Promise.resolve(options.release(announced)).finally(() => {
        options.exit(exitCode)
      })
      return
    }
    for (const worker of workers) worker?.process.kill('SIGTERM')
  }
  for (const signal of STOP_SIGNALS) process.on(signal, stop)
  logger.info('workers started', { workers: options.workers, pid: process.pid })
}

/**
 * Claims DATA_DIR and makes the first-start secret (when one is needed) before forking, so that
 * it is written once, by the directory's owner, and every worker reads the same one; the primary
 * prints its first-start message once every worker listens. The primary never opens its store:
 * the workers open their own.
 */
export async function startPrimary(
  config: Config,
  logger: JsonLogger,
  exit: (code: number) => void,
  launch: Launch,
): Promise<void> {
  const opened = openStore({
    ...pickSettings(config, ['store']),
    ...(await storeClassesFor(config)),
    logger,
  })
  // Until the workers are forked, a stop signal ends the start as a single process's does.
  const starting = new StartSignals(logger, () => {
    void opened.close().finally(() => exit(0))
  })
  opened.claim()
  let resolved: ResolvedKeys
  try {
    resolved = resolveKeys(config, (file) => {
      starting.writing(file)
    })
  } catch (error) {
    await opened.close()
    throw error
  }
  if (starting.stopped) return
  const { keys, generatedFile } = resolved
  runPrimary({
    workers: config.workers,
    logger,
    listening: (url) => {
      if (generatedFile !== undefined)
        printFirstStart({ url, config, keys, file: generatedFile, launch })
    },
    release: (served) => {
      // No worker listened, so nobody printed the secret's token: the next start makes its own.
      if (!served) removeGeneratedSecret(generatedFile)
      return opened.close()
    },
    exit,
  })
  starting.handedOver()
}
