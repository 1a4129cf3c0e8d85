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
import { openStore, releaseHeldLocks } from '../store/open-store.js'
import { isClusterWorker, shouldFork, startPrimary } from './cluster.js'
import { createClusterSlots } from './cluster-slots.js'
import { ConfigError, parseConfig } from './config.js'
import { type ResolvedKeys, removeGeneratedSecret, resolveKeys } from './first-start.js'
import { type Launch, printFirstStart } from './first-start-message.js'
import { unusableAddress, unusableDatabase, unusableDataDir } from './start-errors.js'
import { STOP_SIGNALS, StartSignals } from './start-signals.js'

/** How long an exit waits for buffered log lines to reach a slow reader. */
const LOG_FLUSH_MS = 1000

async function main(): Promise<void> {
  const config = parseConfig(process.env)
  const logger = createJsonLogger({ level: config.logLevel })
  flushOnExit(logger)
  if (!isClusterWorker()) warnNodeEnv(process.env['NODE_ENV'], logger)
  if (shouldFork(config.workers)) {
    await startPrimary(
      config,
      logger,
      (code) => {
        void exit(logger, code)
      },
      launchOf(),
    )
    return
  }
  const starting = new StartSignals(logger, () => {
    releaseHeldLocks()
    void exit(logger, 0)
  })
  const opened = openStore({
    ...pickSettings(config, ['store']),
    ...(await storeClassesFor(config)),
    logger,
    // Workers leave the data directory to their primary.
    ownsDataDir: !isClusterWorker(),
  })
  // The claim comes first: only the process that owns the directory may write to it, the
  // first-start secret included. Then a missing driver refuses the start (saying npm install
  // pg) before listening, giving the lock it took back.
  await opened.prepare().catch(async (error: unknown) => {
    await opened.close().catch(() => undefined)
    throw unusableDataDir(config.dataDir, error)
  })
  let resolved: ResolvedKeys
  try {
    resolved = resolveKeys(config, (file) => {
      starting.writing(file)
    })
  } catch (error) {
    await opened.close()
    throw error
  }
  const { keys, generatedFile } = resolved
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
  // A start that fails before it listens takes back the secret it wrote, whose token it never
  // printed, so that the next start prints one. Then the data directory's lock is given back: the
  // next start need not take it over.
  const refuse = async (error: unknown): Promise<never> => {
    removeGeneratedSecret(generatedFile)
    await service.close().catch(() => undefined)
    throw error
  }
  // The database is migrated before listening: a schema newer than the code refuses the start.
  if (opened.store.capabilities.shared) {
    const { databaseUrl } = config
    await service
      .open()
      .catch((error: unknown) =>
        refuse(databaseUrl === undefined ? error : unusableDatabase(databaseUrl, error)),
      )
  }
  const { url } = await service
    .listen(config.port, config.host)
    .catch((error: unknown) => refuse(unusableAddress(config.host, config.port, error)))
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
    printFirstStart({ url, config, keys, file: generatedFile, launch: launchOf() })
  }

  let stopping = false
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) {
      // A worker's stop is its primary's to decide: a signal sent to the whole process group
      // (systemd, Ctrl-C) reaches it twice, from the group and passed on by the primary.
      if (isClusterWorker()) return
      // A second signal to a single process is someone who will not wait: it exits now, cutting
      // the requests in flight, but gives the data directory's lock back first.
      logger.warn('stopping at once: a second signal', { signal })
      releaseHeldLocks()
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
  // A closed terminal or a service manager's reload sends SIGHUP, which would otherwise kill the
  // process without a word and leave its lock behind.
  for (const signal of STOP_SIGNALS) process.on(signal, stop)
  starting.handedOver()
}

/** How this process was started, for the first-start message's command that makes tokens. */
function launchOf(): Launch {
  return {
    argv: process.argv,
    execArgv: process.execArgv,
    execPath: process.execPath,
    cwd: process.cwd(),
    npmScript: process.env['npm_lifecycle_event'],
  }
}

/**
 * NODE_ENV is compared as written, as the rest of Node's ecosystem does; a value that looks like
 * production but is not exactly `production` gets a warning, as it turns no production rule on.
 */
function warnNodeEnv(nodeEnv: string | undefined, logger: JsonLogger): void {
  const value = nodeEnv?.trim()
  if (value === undefined || value === 'production') return
  if (value.toLowerCase() === 'production') {
    logger.warn('NODE_ENV is not production: only the exact lowercase value turns production on', {
      nodeEnv: value,
    })
  }
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
