import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'

import { ServiceError } from '../../src/domain/errors.js'
import { createSealedJson } from '../../src/domain/sealed-json.js'
import { createDeliveryCursorCodec } from '../../src/webhooks/delivery-cursor.js'

const SECRET = randomBytes(32)
const WEBHOOK = '0190abcd-0000-7000-8000-00000000000a'
const ATTEMPT = '01900000-0000-7000-8000-000000000002'

function assertBadCursor(run: () => unknown): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof ServiceError, String(error))
    assert.equal(error.code, 'bad_request')
    assert.equal(
      error.detail,
      'The query parameter cursor is not a cursor this service made for this endpoint.',
    )
    return true
  })
}

describe("a cursor of an endpoint's delivery log", () => {
  const codec = createDeliveryCursorCodec(SECRET)

  it('carries the endpoint and the last attempt shown', () => {
    assert.deepEqual(codec.decode(codec.encode({ webhookId: WEBHOOK, before: ATTEMPT })), {
      webhookId: WEBHOOK,
      before: ATTEMPT,
    })
  })

  it('is refused when another secret sealed it, or the same secret for another purpose', () => {
    const text = codec.encode({ webhookId: WEBHOOK, before: ATTEMPT })
    assertBadCursor(() => createDeliveryCursorCodec(randomBytes(32)).decode(text))
    for (const purpose of ['', 'user-service delivery cursor key v2']) {
      const other = createSealedJson(SECRET, purpose).seal([1, WEBHOOK, ATTEMPT])
      assertBadCursor(() => codec.decode(other))
    }
    assertBadCursor(() => codec.decode('not a cursor'))
  })

  it('is refused when what it seals is not a version 1 state of two ids', () => {
    // Sealed as the codec seals, so that only the state inside is wrong.
    const seal = createSealedJson(SECRET, 'user-service delivery cursor key v1')
    for (const state of [
      { webhookId: WEBHOOK, before: ATTEMPT },
      [2, WEBHOOK, ATTEMPT],
      [1, WEBHOOK],
      [1, WEBHOOK, ATTEMPT, ATTEMPT],
      [1, 7, ATTEMPT],
      [1, WEBHOOK, 7],
      [1, 'x', ATTEMPT],
      [1, WEBHOOK, 'x'],
      [1, WEBHOOK.toUpperCase(), ATTEMPT],
    ]) {
      assertBadCursor(() => codec.decode(seal.seal(state)))
    }
    assert.deepEqual(codec.decode(seal.seal([1, WEBHOOK, ATTEMPT])), {
      webhookId: WEBHOOK,
      before: ATTEMPT,
    })
  })
})
