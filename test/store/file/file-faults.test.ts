import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { Logger } from '../../../src/log/logger.js'
import {
  backgroundFault,
  checkpointFailed,
  checkpointSucceeded,
} from '../../../src/store/file/file-faults.js'
import { WriteError } from '../../../src/store/write-error.js'

/** A logger that keeps `level message` of each line. */
function keptLines(): { logger: Logger; lines: string[] } {
  const lines: string[] = []
  const keep =
    (level: string) =>
    (msg: string): void => {
      lines.push(`${level} ${msg}`)
    }
  return {
    lines,
    logger: { debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') },
  }
}

const full = (): WriteError =>
  new WriteError('write', Object.assign(new Error('no space'), { code: 'ENOSPC' }))

describe('checkpoint faults in the log', () => {
  it('warns once for an outage of retried checkpoints, says when one succeeds, then warns again at the next outage', () => {
    const { logger, lines } = keptLines()
    const readOnly: string[] = []
    const fault = backgroundFault(logger, '/data', (why) => readOnly.push(why))
    checkpointSucceeded(fault)
    for (let i = 0; i < 5; i += 1) checkpointFailed(fault, full())
    assert.deepEqual(lines, ['warn a checkpoint failed; the next ones try again'])
    checkpointSucceeded(fault)
    checkpointSucceeded(fault)
    checkpointFailed(fault, full())
    assert.deepEqual(lines, [
      'warn a checkpoint failed; the next ones try again',
      'info a checkpoint succeeded again',
      'warn a checkpoint failed; the next ones try again',
    ])
    assert.deepEqual(readOnly, [])
  })

  it('turns the store read-only at a failed fsync or EIO, each time at error', () => {
    const { logger, lines } = keptLines()
    const readOnly: string[] = []
    const fault = backgroundFault(logger, '/data', (why) => readOnly.push(why))
    checkpointFailed(fault, full())
    const io = new WriteError('write', Object.assign(new Error('io'), { code: 'EIO' }))
    checkpointFailed(fault, io)
    assert.deepEqual(lines, [
      'warn a checkpoint failed; the next ones try again',
      'error a checkpoint failed: the store turned read-only',
    ])
    assert.deepEqual(readOnly, ['a checkpoint failed at write (EIO)'])
  })
})
