import { ServiceError } from '../domain/errors.js'
import { createSealedJson } from '../domain/sealed-json.js'
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
 * Opaque, tamper-evident cursors of the delivery log, as the users' list cursors are
 * (domain/sealed-json.ts), under a purpose of their own, so that a users' cursor is not one of
 * these.
 */
export function createDeliveryCursorCodec(secret: Buffer): DeliveryCursorCodec {
  const sealed = createSealedJson(secret, 'user-service delivery cursor key v1')
  return {
    encode(state) {
      return sealed.seal([1, state.webhookId, state.before])
    },
    decode(text) {
      return parseState(sealed.open(text))
    },
  }
}

function parseState(value: unknown): DeliveryCursorState {
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
