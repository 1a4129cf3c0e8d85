/** One HMAC key; `kid` is set when the key came from a `kid=secret` list. */
export interface HmacKey {
  readonly kid: string | undefined
  readonly secret: Buffer
}

/** The keys a token may be signed with, in the order they were configured. */
export interface KeySet {
  readonly keys: readonly HmacKey[]
  /** True for a `JWT_SECRETS` list: a token's `kid` then picks the key. */
  readonly byKid: boolean
}

export const MIN_SECRET_BYTES = 32
const BASE64URL_PREFIX = 'base64url:'
const KID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/

/** Thrown for a secret that cannot be used; the message names the variable, never the value. */
export class KeyError extends Error {
  override name = 'KeyError'
}

/** Turns one configured secret into key bytes: `base64url:` text is decoded, anything else is UTF-8. */
export function parseSecret(text: string, variable: string): Buffer {
  let secret: Buffer
  if (text.startsWith(BASE64URL_PREFIX)) {
    const encoded = text.slice(BASE64URL_PREFIX.length)
    secret = Buffer.from(encoded, 'base64url')
    // Node's decoder skips characters outside the alphabet (padding, spaces, base64's + and /),
    // and drops a dangling character and stray low bits: a key that is not the text's exact
    // encoding is not the key the operator meant.
    if (secret.toString('base64url') !== encoded) {
      throw new KeyError(`${variable}: the text after "base64url:" is not base64url`)
    }
  } else {
    secret = Buffer.from(text)
  }
  if (secret.length < MIN_SECRET_BYTES) {
    throw new KeyError(
      `${variable}: a secret must be at least ${MIN_SECRET_BYTES} bytes (got ${secret.length})`,
    )
  }
  return secret
}

/** A key set from a single secret: any `kid` in a token is ignored. */
export function createSingleKeySet(text: string, variable = 'JWT_SECRET'): KeySet {
  return Object.freeze({
    keys: Object.freeze([{ kid: undefined, secret: parseSecret(text, variable) }]),
    byKid: false,
  })
}

/** A key set from `kid1=secret1,kid2=secret2` (the first key signs new tokens). */
export function parseKeyList(text: string, variable = 'JWT_SECRETS'): KeySet {
  const keys: HmacKey[] = []
  const seen = new Set<string>()
  for (const entry of text.split(',')) {
    const eq = entry.indexOf('=')
    if (eq === -1) throw new KeyError(`${variable}: each entry must be kid=secret`)
    const kid = entry.slice(0, eq).trim()
    if (!KID_PATTERN.test(kid)) {
      throw new KeyError(`${variable}: a kid must be 1-64 characters of [A-Za-z0-9._-]`)
    }
    if (seen.has(kid)) throw new KeyError(`${variable}: the kid "${kid}" appears twice`)
    seen.add(kid)
    keys.push({
      kid,
      secret: parseSecret(entry.slice(eq + 1).trim(), `${variable} (kid "${kid}")`),
    })
  }
  return Object.freeze({ keys: Object.freeze(keys), byKid: true })
}
