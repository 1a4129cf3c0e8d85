import {
  closeSync,
  fsyncSync,
  openSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs'
import path from 'node:path'

import type { Logger } from '../../log/logger.js'
import { makeDurableDirectory, syncDirectorySync } from './atomic-write.js'
import { hasCode } from './errno.js'
import { REPLACE_OWN } from './own-files.js'

/** Where a damaged record was found, and why it is damaged. */
export interface DamagedRecord {
  readonly file: string
  readonly segmentName: string
  readonly offset: number
  readonly line: Buffer
  readonly reason: string
  /** The id read from the record, when one could be. */
  readonly id: string | undefined
}

/**
 * Copies a damaged record, durably, to the quarantine `dir` (once: a later start finds it there)
 * and logs it; with no `dir` it is only logged. The segment is left as it is: every other record
 * keeps its offset.
 */
export function quarantineRecord(
  dir: string | undefined,
  logger: Logger,
  record: DamagedRecord,
): void {
  const { file, segmentName, offset, line, reason, id } = record
  const fields = { file, offset, bytes: line.length, reason, ...(id === undefined ? {} : { id }) }
  if (dir === undefined) {
    logger.warn('left out a damaged event record', fields)
    return
  }
  makeDurableDirectory(dir)
  const name = `events-${segmentName.slice(0, 16)}-${offset}.ndjson`
  const target = path.join(dir, name)
  let exists = true
  try {
    statSync(target)
  } catch (error) {
    if (!hasCode(error, 'ENOENT')) throw error
    exists = false
  }
  if (!exists) {
    const temp = path.join(dir, `.${name}.tmp`)
    const fd = openSync(temp, REPLACE_OWN, 0o600)
    try {
      writeSync(fd, line)
      writeSync(fd, '\n')
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    try {
      renameSync(temp, target)
    } catch (error) {
      unlinkSync(temp)
      throw error
    }
    syncDirectorySync(dir)
  }
  logger.warn('quarantined a damaged event record', { ...fields, quarantine: target })
}
