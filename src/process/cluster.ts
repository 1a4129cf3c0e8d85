import cluster, { type Worker } from 'node:cluster'

import type { JsonLogger, Logger } from '../log/logger.js'
import { pickSettings } from '../settings-by-owner.js'
import { storeClassesFor } from '../store/create-store.js'
import { openStore } from '../store/open-store.js'
import { serveClusterSlots } from './cluster-slots.js'
import type { Config } from './config.js'
import { resolveKeys } from './first-start.js'

export interface PrimaryOptions {
  readonly workers: number
  readonly logger: Logger
  /** Runs once every worker has exited after a signal: releases what the primary holds. */
  readonly release: () => Promise<void> | void
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
 * listening port through node:cluster), forks a new one when one dies, and on SIGTERM or SIGINT
 * passes the signal on, waits for every worker to finish its requests, then exits 0. Only the
 * PostgreSQL store may run here (config.ts refuses the file store): workers share no memory.
 */
export function runPrimary(options: PrimaryOptions): void {
  const { logger } = options
  let stopping = false
  let exitCode = 0
  const listened = new Set<number>()
  const fork = (): Worker => cluster.fork()
  serveClusterSlots()
  for (let i = 0; i < options.workers; i += 1) fork()
  cluster.on('listening', (worker) => {
    listened.add(worker.id)
  })
  cluster.on('exit', (worker, code, signal) => {
    if (!stopping && !listened.has(worker.id)) {
      // A worker that could not even start (a refused configuration, no database) would fail
      // again: stop instead of forking forever.
      logger.error('a worker could not start; stopping', { pid: worker.process.pid, code, signal })
      exitCode = 1
      stop('SIGTERM')
      return
    }
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        void Promise.resolve(options.release()).finally(() => {
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
    logger.info('shutting down the workers', { signal })
    const workers = Object.values(cluster.workers ?? {})
    if (workers.length === 0) {
      void Promise.resolve(options.release()).finally(() => {
        options.exit(exitCode)
      })
      return
    }
    for (const worker of workers) worker?.process.kill('SIGTERM')
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  logger.info('workers started', { workers: options.workers, pid: process.pid })
}

/**
 * Claims DATA_DIR and makes the first-start secret (when one is needed) before forking, so that
 * it is written once, by the directory's owner, and every worker reads the same one. The primary
 * never opens its store: the workers open their own.
 */
export async function startPrimary(
  config: Config,
  logger: JsonLogger,
  exit: (code: number) => void,
): Promise<void> {
  const opened = openStore({
    ...pickSettings(config, ['store']),
    ...(await storeClassesFor(config)),
    logger,
  })
  opened.claim()
  try {
    const { generatedFile } = await resolveKeys(config)
    if (generatedFile !== undefined)
      logger.always('a new secret was written for the workers', { file: generatedFile })
  } catch (error) {
    await opened.close()
    throw error
  }
  runPrimary({
    workers: config.workers,
    logger,
    release: () => opened.close(),
    exit,
  })
}
