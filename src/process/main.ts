/**
 * The process entry: the only module that reads process.env, listens and handles signals.
 * Configuration comes from the environment (see README); a bad value stops the start.
 */
import path from 'node:path'

import { SCOPES } from '../auth/authenticate.js'
import type { KeySet } from '../auth/keys.js'
import { signToken } from '../auth/sign-token.js'
import { StartError } from '../domain/errors.js'
import { createJsonLogger, type JsonLogger } from '../log/logger.js'
import { createService } from '../service.js'
import { createStore } from '../store/create-store.js'
import { lockDataDir } from '../store/file/data-dir-lock.js'
import { isClusterWorker, shouldFork, startPrimary } from './cluster.js'
import { type Config, ConfigError, parseConfig, SERVICE_DEFAULTS } from './config.js'
import { resolveKeys } from './first-start.js'

/** How long an exit waits for buffered log lines to reach a slow reader. */
const LOG_FLUSH_MS = 1000

async function main(): Promise<void> {
  const config = parseConfig(process.env)
  const logger = createJsonLogger({ level: config.logLevel })
  if (shouldFork(config.workers)) {
    await startPrimary(config, logger, (code) => {
      void exit(logger, code)
    })
    return
  }
  const store = createStore({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    logger,
    eventsRetentionDays: config.eventsRetentionDays,
    checkpointMs: config.checkpointMs,
    postgres: {
      statementTimeoutMs: config.databaseStatementTimeoutMs,
      idleInTransactionTimeoutMs: config.databaseIdleInTransactionTimeoutMs,
      feedStallWarnMs: config.feedStallWarnMs,
    },
  })
  // The lock comes first: only the process that owns the directory may write to it, the
  // first-start secret included. A store that keeps no files there (a database) leaves the lock
  // to the process; workers leave it to their primary.
  store.lock()
  const dirLock =
    store.capabilities.dataDir === undefined && !isClusterWorker()
      ? lockDataDir(config.dataDir)
      : undefined
  const releaseDir = (): void => {
    if (dirLock?.held === true && !dirLock.release())
      logger.warn('could not remove the lock file', { file: dirLock.file })
  }
  // Refuses the start (saying npm install pg) before listening when the driver is missing.
  await store.prepare()
  const { keys, generatedFile } = await resolveKeys(config).catch(async (error: unknown) => {
    await store.close()
    releaseDir()
    throw error
  })
  const service = createService({
    ...SERVICE_DEFAULTS,
    ...config,
    store,
    keys,
    logger,
    now: Date.now,
    maintenanceFile: path.join(config.dataDir, 'maintenance'),
  })
  service.server.on('error', (error) => {
    logger.error('the server failed', { error: String(error) })
    void exit(logger, 1)
  })
  // The database is migrated before listening: a schema newer than the code refuses the start.
  if (store.capabilities.shared) await service.open()
  const { url } = await service.listen(config.port, config.host)
  // Always printed, whatever LOG_LEVEL says: tools read the URL from it.
  logger.always('listening', {
    url,
    basePath: config.basePath,
    dataDir: config.dataDir,
    pid: process.pid,
  })
  if (generatedFile !== undefined) printFirstStart(url, config, keys, generatedFile)

  let stopping = false
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) {
      process.exit(1)
    }
    stopping = true
    logger.info('shutting down', { signal })
    service.close().then(
      () => {
        releaseDir()
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

/** Exits once the log lines are out, or after LOG_FLUSH_MS if the reader does not take them. */
async function exit(logger: JsonLogger, code: number): Promise<void> {
  const timer = setTimeout(() => process.exit(code), LOG_FLUSH_MS)
  await logger.flush()
  clearTimeout(timer)
  process.exit(code)
}

/** Once, on stderr and outside the JSON logs: the new secret's file, a token and a curl line. */
function printFirstStart(url: string, config: Config, keys: KeySet, file: string): void {
  const key = keys.keys[0]
  if (key === undefined) return
  const now = Math.floor(Date.now() / 1000)
  const token = signToken(
    {
      sub: 'first-start-admin',
      // The three user scopes (§6); the feed's scope stands alone and is shown as its own example.
      scope: SCOPES.filter((scope) => scope !== 'events:read').join(' '),
      iat: now,
      exp: now + 24 * 3600,
      ...(config.issuer === undefined ? {} : { iss: config.issuer }),
      ...(config.audience === undefined ? {} : { aud: config.audience }),
    },
    { key },
  )
  process.stderr.write(
    [
      '',
      `No JWT_SECRET was set, so a new random secret was written to ${file} (mode 0600).`,
      'It is used on every later start with this DATA_DIR. Set JWT_SECRET in production.',
      '',
      'A token with every scope, valid for 24 hours (npm run token makes more):',
      '',
      `  ${token}`,
      '',
      'Try it:',
      '',
      `  curl -H "Authorization: Bearer ${token}" ${url}${config.basePath}/users`,
      '',
      'The change feed (GET /events) needs the scope events:read, on a token of its own:',
      '',
      '  npm run -s token -- --sub feed-reader --scope events:read',
      '',
      '',
    ].join('\n'),
  )
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
