import { readdir, readFile, unlink } from 'node:fs/promises'
import path from 'node:path'

import { EVENT_ID, formatEventId } from '../../domain/event.js'
import type { DeliveryAttempt, StoredWebhook } from '../../domain/webhook.js'
import type { Logger } from '../../log/logger.js'
import { hasCode, namingFile } from './errno.js'
import { checkNotSpecial } from './own-files.js'
import { parseAttemptLine, parseStoredWebhook } from './stored-webhooks.js'

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
const WEBHOOK_FILE = new RegExp(`^(${UUID})\\.(json|cursor|log)$`)
const TEMP_FILE = /^\..*\.tmp$/

/** The names of an endpoint's three files in `DATA_DIR/webhooks/`. */
export function webhookFileNames(id: string): { endpoint: string; cursor: string; log: string } {
  return { endpoint: `${id}.json`, cursor: `${id}.cursor`, log: `${id}.log` }
}

/** An endpoint as its files hold it. */
export interface LoadedWebhook {
  readonly hook: StoredWebhook
  readonly cursor: string
  /** Its log's attempts, oldest first, each once. */
  readonly log: readonly DeliveryAttempt[]
  /** The lines its log file holds, torn or repeated ones included. */
  readonly logLines: number
  /** Its log file ends inside a line (a power loss tore an append): the next starts a new one. */
  readonly logTorn: boolean
}

/**
 * Reads `DATA_DIR/webhooks/` at open. Temp files of writes a crash cut short, and the cursor and
 * log files of endpoints whose file is gone (a delete a crash cut short), are removed. An
 * endpoint file the store did not write is left where it is, unloaded, and logged. A cursor file
 * that is missing or unreadable makes the cursor start before every event: deliveries may repeat,
 * never skip. A log's torn or foreign lines are passed over.
 */
export async function loadWebhookFiles(dir: string, logger: Logger): Promise<LoadedWebhook[]> {
  const ids = new Set<string>()
  const leftovers: string[] = []
  for (const name of await readdir(dir)) {
    const match = WEBHOOK_FILE.exec(name)
    if (match?.[2] === 'json' && match[1] !== undefined) ids.add(match[1])
    else if (TEMP_FILE.test(name) || match !== null) leftovers.push(name)
  }
  const loaded: LoadedWebhook[] = []
  for (const id of ids) {
    const names = webhookFileNames(id)
    const file = path.join(dir, names.endpoint)
    checkNotSpecial(file)
    const text = await readFile(file, 'utf8').catch((error: unknown) => {
      throw namingFile(error, file)
    })
    const hook = parseStoredWebhook(text, id)
    if (hook === undefined) {
      logger.error('a webhook endpoint file is damaged: the endpoint is not loaded', { file })
      continue
    }
    const cursor = await readCursor(path.join(dir, names.cursor), logger)
    loaded.push({ hook, cursor, ...(await readLog(path.join(dir, names.log))) })
  }
  for (const name of leftovers) {
    const id = WEBHOOK_FILE.exec(name)?.[1]
    if (id !== undefined && ids.has(id)) continue
    await unlink(path.join(dir, name)).catch(() => undefined)
  }
  return loaded
}

async function readCursor(file: string, logger: Logger): Promise<string> {
  const text = await readOptional(file)
  const cursor = text?.trim()
  if (cursor !== undefined && EVENT_ID.test(cursor)) return cursor
  logger.warn(
    'a webhook cursor file is missing or damaged: delivery starts again from the oldest event kept',
    {
      file,
    },
  )
  return formatEventId(0)
}

async function readLog(
  file: string,
): Promise<{ log: DeliveryAttempt[]; logLines: number; logTorn: boolean }> {
  const text = (await readOptional(file)) ?? ''
  const lines = text.split('\n').filter((line) => line !== '')
  const seen = new Set<string>()
  const log: DeliveryAttempt[] = []
  for (const line of lines) {
    const attempt = parseAttemptLine(line)
    // A rewrite of the log may repeat an attempt appended while it ran.
    if (attempt === undefined || seen.has(attempt.id)) continue
    seen.add(attempt.id)
    log.push(attempt)
  }
  return { log, logLines: lines.length, logTorn: text !== '' && !text.endsWith('\n') }
}

async function readOptional(file: string): Promise<string | undefined> {
  checkNotSpecial(file)
  try {
    return await readFile(file, 'utf8')
  } catch (error) {
    if (hasCode(error, 'ENOENT')) return undefined
    throw namingFile(error, file)
  }
}
