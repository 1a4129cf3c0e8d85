import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { ServiceError } from '../../src/domain/errors.js'
import {
  LIFECYCLE_ACTIONS,
  type LifecycleAction,
  nextStatus,
  TRANSITIONS,
} from '../../src/domain/lifecycle.js'
import { USER_STATUSES, type UserStatus } from '../../src/domain/user.js'
import { ERROR_CODES } from '../../src/http/problem.js'

/** §2 of the contract, cell by cell: the status an action leads to, or undefined for a 409. */
const TABLE: ReadonlyArray<[UserStatus, LifecycleAction, UserStatus | undefined]> = [
  ['pending', 'activate', 'active'],
  ['active', 'activate', 'active'],
  ['suspended', 'activate', 'active'],
  ['pending', 'suspend', undefined],
  ['active', 'suspend', 'suspended'],
  ['suspended', 'suspend', 'suspended'],
]

describe('nextStatus', () => {
  for (const [from, action, to] of TABLE) {
    if (to === undefined) {
      it(`refuses to ${action} a ${from} user with 409 invalid_transition`, () => {
        assert.throws(
          () => nextStatus(from, action),
          (error: unknown) => {
            assert.ok(error instanceof ServiceError)
            assert.equal(error.code, 'invalid_transition')
            assert.equal(ERROR_CODES[error.code].status, 409)
            assert.match(error.detail, new RegExp(from))
            return true
          },
        )
      })
    } else {
      it(`takes a ${from} user to ${to} on ${action}`, () => {
        assert.equal(nextStatus(from, action), to)
      })
    }
  }

  it('covers every status and action of the table', () => {
    assert.equal(TABLE.length, USER_STATUSES.length * LIFECYCLE_ACTIONS.length)
    for (const action of LIFECYCLE_ACTIONS) {
      for (const from of USER_STATUSES) {
        const row = TABLE.find(([rowFrom, rowAction]) => rowFrom === from && rowAction === action)
        assert.ok(row !== undefined, `${from} ${action}`)
        assert.equal(TRANSITIONS[action][from], row[2], `TRANSITIONS.${action}.${from}`)
      }
    }
  })

  it('never leads to pending', () => {
    for (const action of LIFECYCLE_ACTIONS) {
      for (const from of USER_STATUSES) {
        assert.notEqual(TRANSITIONS[action][from], 'pending')
      }
    }
  })
})

describe('the 409 invalid_transition message', () => {
  it('names the status and the refused action in words', () => {
    assert.throws(
      () => nextStatus('pending', 'suspend'),
      (error: unknown) => {
        assert.ok(error instanceof ServiceError)
        assert.equal(error.detail, 'A pending user cannot be suspended.')
        return true
      },
    )
  })
})
