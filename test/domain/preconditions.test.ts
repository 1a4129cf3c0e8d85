import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { ServiceError } from '../../src/domain/errors.js'
import {
  evaluatePreconditions,
  matchesIfMatch,
  matchesIfNoneMatch,
  NO_PRECONDITIONS,
  preconditionFailed,
} from '../../src/domain/preconditions.js'

const TAG = '"v3"'

describe('evaluatePreconditions', () => {
  it('passes when the request carries no validators', () => {
    assert.equal(evaluatePreconditions(NO_PRECONDITIONS, TAG, true), 'pass')
    assert.equal(evaluatePreconditions(NO_PRECONDITIONS, TAG, false), 'pass')
  })

  it('fails a stale If-Match whatever the method', () => {
    assert.equal(
      evaluatePreconditions({ ifMatch: '"v2"', ifNoneMatch: undefined }, TAG, true),
      'failed',
    )
    assert.equal(
      evaluatePreconditions({ ifMatch: '"v2"', ifNoneMatch: undefined }, TAG, false),
      'failed',
    )
  })

  it('answers not_modified to a matching If-None-Match on GET and HEAD, failed on other methods', () => {
    assert.equal(
      evaluatePreconditions({ ifMatch: undefined, ifNoneMatch: TAG }, TAG, true),
      'not_modified',
    )
    assert.equal(
      evaluatePreconditions({ ifMatch: undefined, ifNoneMatch: TAG }, TAG, false),
      'failed',
    )
  })

  it('checks If-Match before If-None-Match', () => {
    assert.equal(evaluatePreconditions({ ifMatch: '"v2"', ifNoneMatch: TAG }, TAG, true), 'failed')
    assert.equal(
      evaluatePreconditions({ ifMatch: TAG, ifNoneMatch: TAG }, TAG, true),
      'not_modified',
    )
    assert.equal(evaluatePreconditions({ ifMatch: TAG, ifNoneMatch: '"v2"' }, TAG, false), 'pass')
  })
})

describe('matchesIfMatch', () => {
  it('matches * also with surrounding whitespace', () => {
    assert.equal(matchesIfMatch('*', TAG), true)
    assert.equal(matchesIfMatch(' * ', TAG), true)
  })

  it('finds the tag in a list with spaces and empty elements', () => {
    assert.equal(matchesIfMatch('"v1", ,  "v3" ,', TAG), true)
    assert.equal(matchesIfMatch('"v1", "v2"', TAG), false)
  })

  it('compares strongly: a weak tag never matches', () => {
    assert.equal(matchesIfMatch('W/"v3"', TAG), false)
  })
})

describe('matchesIfNoneMatch', () => {
  it('matches * also with surrounding whitespace', () => {
    assert.equal(matchesIfNoneMatch(' * ', TAG), true)
  })

  it('compares weakly: W/ plus the tag matches, inside a list too', () => {
    assert.equal(matchesIfNoneMatch('W/"v3"', TAG), true)
    assert.equal(matchesIfNoneMatch('"v1", W/"v3"', TAG), true)
    assert.equal(matchesIfNoneMatch('"v1", W/"v2"', TAG), false)
  })

  it('does not strip W/ from the middle of a tag', () => {
    assert.equal(matchesIfNoneMatch('"W/v3"', '"v3"'), false)
  })
})

describe('preconditionFailed', () => {
  it('is a precondition_failed ServiceError naming the current tag', () => {
    const error = preconditionFailed(TAG)
    assert.ok(error instanceof ServiceError)
    assert.equal(error.code, 'precondition_failed')
    assert.equal(error.detail, 'A precondition does not hold for the current ETag "v3".')
  })
})
