import { createHmac, timingSafeEqual } from 'node:crypto'

/**
 * Opaque, tamper-evident text for a JSON value (the list cursors): the value's JSON in base64url
 * and its HMAC-SHA-256 under a key derived from the service's secret and a purpose, so that the
 * text outlives a restart but not a change of secret, and one purpose's text is not another's.
 */
export interface SealedJson {
  seal(value: unknown): string
  /** The value `text` seals, or undefined when it is not text this seal made. */
  open(text: string): unknown
}

export function createSealedJson(secret: Buffer, purpose: string): SealedJson {
  const key = createHmac('sha256', secret).update(purpose).digest()
  const sign = (payload: string): Buffer => createHmac('sha256', key).update(payload).digest()
  return {
    seal(value) {
      const payload = Buffer.from(JSON.stringify(value)).toString('base64url')
      return `${payload}.${sign(payload).toString('base64url')}`
    },
    open(text) {
      const [payload, signature, ...rest] = text.split('.')
      if (payload === undefined || signature === undefined || rest.length > 0) return undefined
      const expected = sign(payload)
      const given = Buffer.from(signature, 'base64url')
      if (
        given.toString('base64url') !== signature ||
        given.length !== expected.length ||
        !timingSafeEqual(given, expected)
      ) {
        return undefined
      }
      try {
        return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as unknown
      } catch {
        return undefined
      }
    },
  }
}
