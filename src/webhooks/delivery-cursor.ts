import { createHmac, timingSafeEqual } from 'node:crypto'

import { ServiceError } from '../domain/errors.js'
import { isCanonicalUuid } from '../domain/uuid7.js'

/** Where a page of an endpoint's delivery log ended: the endpoint, and its last attempt shown. */
export interface DeliveryCursorState {
  readonly webhookId: string
  readonly before: string
}

export interface DeliveryCursorCodec {
  encode(state: DeliveryCursorState): string
  /** The state a cursor carries, or a 400 naming `cursor`. */
  decode(text: string): DeliveryCursorState
}

/**
 * Opaque, tamper-evident cursors of the delivery log, as the users' list cursors are: JSON,
 * base64url and an HMAC, under a key of their own derived from the service's secret, so that a
 * users' cursor is not one of these.
 */
export function createDeliveryCursorCodec(secret: Buffer): DeliveryCursorCodec {
  const key = createHmac('sha256', secret).update('user-service delivery cursor key v1').digest()
  const sign = (payload: string): Buffer => createHmac('sha256', key).update(payload).digest()
  return {
    encode(state) {
      const payload = Buffer.from(JSON.stringify([1, state.webhookId, state.before])).toString(
        'base64url',
      )
      return `${payload}.${sign(payload).toString('base64url')}`
    },
    decode(text) {
      const [payload, signature, ...rest] = text.split('.')
      if (payload === undefined || signature === undefined || rest.length > 0) throw badCursor()
      const expected = sign(payload)
      const given = Buffer.from(signature, 'base64url')
      if (
        given.toString('base64url') !== signature ||
        given.length !== expected.length ||
        !timingSafeEqual(given, expected)
      ) {
        throw badCursor()
      }
      return parseState(Buffer.from(payload, 'base64url').toString('utf8'))
    },
  }
}

function parseState(json: string): DeliveryCursorState {
  let value: unknown
  try {
    value = JSON.parse(json)
  } catch {
    throw badCursor()
  }
  if (!Array.isArray(value) || value.length !== 3 || value[0] !== 1) throw badCursor()
  const [, webhookId, before] = value as unknown[]
  if (typeof webhookId !== 'string' || !isCanonicalUuid(webhookId)) throw badCursor()
  if (typeof before !== 'string' || !isCanonicalUuid(before)) throw badCursor()
  return { webhookId, before }
}

export function badCursor(): ServiceError {
  return new ServiceError(
    'bad_request',
    'The query parameter cursor is not a cursor this service made for this endpoint.',
  )
}
