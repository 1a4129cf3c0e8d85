/**
 * Webhook secrets and signatures as the Standard Webhooks specification gives them
 * (docs/webhooks.md): a `whsec_` secret, and `v1,<base64 HMAC-SHA256>` of
 * `<webhook-id>.<webhook-timestamp>.<body>` keyed with the secret's decoded bytes.
 */
import { createHmac, randomBytes } from 'node:crypto'

const PREFIX = 'whsec_'

/** A new secret: `whsec_` and the padded standard base64 of 32 bytes from the CSPRNG. */
export function newSecret(): string {
  return `${PREFIX}${randomBytes(32).toString('base64')}`
}

/** The key a secret stands for: the bytes its base64 (after `whsec_`) encodes. */
function keyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64')
}

/** One signature, `v1,<base64>`, of a message by one secret. */
export function sign(
  secret: string,
  msgId: string,
  timestampSeconds: number,
  body: string | Uint8Array,
): string {
  const mac = createHmac('sha256', keyOf(secret))
  mac.update(`${msgId}.${timestampSeconds}.`)
  mac.update(body)
  return `v1,${mac.digest('base64')}`
}

/**
 * The `webhook-signature` header: a signature by each secret, the current one first (during a
 * rotation's overlap the previous one follows), space separated.
 */
export function signatureHeader(
  secrets: readonly string[],
  msgId: string,
  timestampSeconds: number,
  body: string | Uint8Array,
): string {
  return secrets.map((secret) => sign(secret, msgId, timestampSeconds, body)).join(' ')
}
