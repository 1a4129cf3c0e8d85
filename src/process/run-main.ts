/**
 * The process entry: the only module that reads process.env, listens and handles signals.
 * Configuration comes from the environment (see README); a bad value stops the start.
 */
import path from 'node:path'

import { StartError } from '../domain/errors.js'
import { createJsonLogger, flushOnExit, type JsonLogger } from '../log/logger.js'
import { createService } from '../service.js'
import { pickSettings } from '../settings-by-owner.js'
import { storeClassesFor } from '../store/create-store.js'
import { openStore } from '../store/open-store.js'
import { isClusterWorker, shouldFork, startPrimary } from './cluster.js'
import { createClusterSlots } from './cluster-slots.js'
import { ConfigError, parseConfig } from './config.js'
import { resolveKeys } from './first-start.js'
import { formatFirstStart } from './first-start-message.js'

/** How long an exit waits for buffered log lines to reach a slow reader. */
const LOG_FLUSH_MS = 1000

async function main(): Promise<void> {
  const config = parseConfig(process.env)
  const logger = createJsonLogger({ level: config.logLevel })
  flushOnExit(logger)
  if (shouldFork(config.workers)) {
    await startPrimary(config, logger, (code) => {
      void exit(logger, code)
    })
    return
  }
  const opened = openStore({
    ...pickSettings(config, ['store']),
    ...(await storeClassesFor(config)),
    logger,
    // Workers leave the data directory to their primary.
    ownsDataDir: !isClusterWorker(),
  })
  // The claim comes first: only the process that owns the directory may write to it, the
  // first-start secret included. Then a missing driver refuses the start (saying npm install
  // pg) before listening.
  await opened.prepare().catch((error: unknown) => {
    throw unusableDataDir(config.dataDir, error)
  })
  const { keys, generatedFile } = await resolveKeys(config).catch(async (error: unknown) => {
    await opened.close()
    throw error
  })
  const service = createService({
    ...config,
    store: opened,
    keys,
    logger,
    now: Date.now,
    maintenanceFile: path.join(config.dataDir, 'maintenance'),
    // MAX_EVENT_STREAMS and the one import at a time are the service's: the primary counts them.
    slots: isClusterWorker() ? createClusterSlots() : undefined,
  })
  // The database is migrated before listening: a schema newer than the code refuses the start.
  if (opened.store.capabilities.shared) await service.open()
  const { url } = await service.listen(config.port, config.host).catch(async (error: unknown) => {
    // The data directory's lock is given back: the next start need not take it over.
    await service.close().catch(() => undefined)
    throw unusableAddress(config.host, config.port, error)
  })
  let failed = false
  const fail = (): void => {
    if (failed) return
    failed = true
    // The data directory's lock is given back first: the next start need not take it over.
    void service
      .close()
      .catch(() => undefined)
      .finally(() => exit(logger, 1))
  }
  service.server.on('error', (error) => {
    logger.error('the server failed', { error: String(error) })
    fail()
  })
  // A store that cannot load has said why (service.ts logs it); the process ends.
  service.open().catch(fail)
  // Always printed, whatever LOG_LEVEL says: tools read the URL from it.
  logger.always('listening', {
    url,
    basePath: config.basePath,
    dataDir: config.dataDir,
    pid: process.pid,
  })
  if (generatedFile !== undefined) {
    const message = formatFirstStart({
      url,
      config,
      keys,
      file: generatedFile,
      now: Math.floor(Date.now() / 1000),
      launch: {
        argv: process.argv,
        execArgv: process.execArgv,
        execPath: process.execPath,
        cwd: process.cwd(),
        npmScript: process.env['npm_lifecycle_event'],
      },
    })
    if (message !== undefined) process.stderr.write(message)
  }

  let stopping = false
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) {
      process.exit(1)
    }
    stopping = true
    logger.info('shutting down', { signal })
    service.close().then(
      () => {
        logger.info('stopped', { signal })
        void exit(logger, 0)
      },
      (error: unknown) => {
        logger.error('shutdown failed', { error: String(error) })
        void exit(logger, 1)
      },
    )
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

/** A data directory the process cannot make, write or lock, as one line naming DATA_DIR. */
function unusableDataDir(dataDir: string, error: unknown): unknown {
  const code = errnoOf(error)
  if (error instanceof StartError || code === undefined) return error
  return new StartError(
    `DATA_DIR ${dataDir} cannot be used (${code}): it must be a directory this user may create, read and write`,
  )
}

/** An address the server cannot listen on, as one line naming HOST or PORT. */
function unusableAddress(host: string, port: number, error: unknown): unknown {
  const code = errnoOf(error)
  if (code === 'EADDRINUSE') return new StartError(`PORT ${port} is in use on ${host} (EADDRINUSE)`)
  if (code === 'EACCES')
    return new StartError(`PORT ${port} needs privileges this user lacks (EACCES)`)
  if (code === undefined) return error
  return new StartError(
    `HOST ${host} cannot be listened on (${code}): give one of the host's own addresses`,
  )
}

function errnoOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' && /^E[A-Z]+$/.test(code) ? code : undefined
}

/** Exits once the log lines are out, or after LOG_FLUSH_MS if the reader does not take them. */
async function exit(logger: JsonLogger, code: number): Promise<void> {
  const timer = setTimeout(() => process.exit(code), LOG_FLUSH_MS)
  await logger.flush()
  clearTimeout(timer)
  process.exit(code)
}

/** Starts the service from the environment; a start that fails says why on stderr and exits 1. */
export function runMain(): void {
  main().catch((error: unknown) => {
    if (error instanceof ConfigError || error instanceof StartError) {
      process.stderr.write(`user-service: cannot start: ${error.message}\n`)
    } else {
      process.stderr.write(
        `user-service: cannot start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
      )
    }
    process.exit(1)
  })
}
