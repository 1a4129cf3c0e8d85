import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { HttpError } from '../../src/http/problem.js'
import { describeCause, StorageFaultLog } from '../../src/ops/storage-faults.js'
import { WriteError } from '../../src/store/write-error.js'
import { createMemoryLogger } from '../helpers/service.js'

const systemError = (code: string, syscall: string, errno: number): Error =>
  Object.assign(new Error(`${code}: ${syscall}`), { code, syscall, errno })

describe('describeCause', () => {
  it('names the step, errno, syscall and path of a failed durable write', () => {
    const cause = Object.assign(systemError('ENOSPC', 'open', -28), { path: '/data/users/.x.tmp' })
    assert.deepEqual(describeCause(new WriteError('write', cause)), {
      step: 'write',
      errno: 'ENOSPC',
      syscall: 'open',
      path: '/data/users/.x.tmp',
    })
    assert.deepEqual(
      describeCause(
        new WriteError('file-sync', Object.assign(new Error('EROFS'), { code: 'EROFS' })),
      ),
      { step: 'file-sync', errno: 'EROFS' },
    )
  })

  it("names a SQLSTATE and never the database's message, and a bare driver error by its message", () => {
    assert.deepEqual(
      describeCause(
        Object.assign(new Error('Key (email)=(a@b.io) is bad'), {
          code: '57P01',
          severity: 'FATAL',
        }),
      ),
      { sqlstate: '57P01' },
    )
    assert.deepEqual(describeCause(systemError('ECONNREFUSED', 'connect', -111)), {
      errno: 'ECONNREFUSED',
      syscall: 'connect',
    })
    assert.deepEqual(describeCause(new Error('Connection terminated unexpectedly')), {
      error: 'Connection terminated unexpectedly',
    })
    assert.deepEqual(describeCause(undefined), {})
  })
})

describe('StorageFaultLog', () => {
  it('logs the first fault at error, the next at debug, and the end only once the store is healthy', () => {
    const lines: Record<string, unknown>[] = []
    let healthy = false
    const log = new StorageFaultLog({
      logger: createMemoryLogger(lines),
      storeHealthy: () => healthy,
    })
    const fault = new HttpError('storage_unavailable', 'Storage refused the write.', {
      cause: systemError('ENOSPC', 'write', -28),
    })
    log.wrote()
    assert.deepEqual(lines, [], 'a write outside an episode says nothing')
    log.fault(fault, { requestId: 'a', operation: 'createUser' })
    log.fault(fault, { requestId: 'b', operation: 'importUsers', line: 3 })
    log.wrote()
    assert.equal(
      log.inEpisode,
      true,
      'a write while the store is not healthy does not end the episode',
    )
    healthy = true
    log.wrote()
    assert.equal(log.inEpisode, false)
    log.fault(fault, { requestId: 'c', operation: 'updateUser' })
    assert.deepEqual(
      lines.map((line) => [
        line['level'],
        line['msg'],
        line['requestId'],
        line['line'],
        line['faults'],
      ]),
      [
        ['error', 'storage fault', 'a', undefined, undefined],
        ['debug', 'storage fault again', 'b', 3, 2],
        ['info', 'storage works again', undefined, undefined, 2],
        ['error', 'storage fault', 'c', undefined, undefined],
      ],
    )
  })
})
