import type { FieldErrors } from '../users/field-errors.js'
import { countCodePoints, hasLoneSurrogate, ILL_FORMED } from '../users/text-rules.js'
import { MAX_URL_LENGTH } from './webhook-fields.js'

/**
 * Whether a URL's host may not be registered: a refused address literal in any spelling, or a
 * `localhost` name, unless WEBHOOK_ALLOW_NETWORKS allows it (webhooks/address-policy.ts decides).
 */
export type RefusedHost = (url: URL) => boolean

/*
 * The WHATWG parser drops surrounding C0 controls and spaces and removes tabs and newlines
 * anywhere: a URL holding one would be sent to another address than the one shown. C1 controls
 * and other white space are refused alike, so that what is stored is what a reader sees.
 */
const NOT_IN_URL = /[\u0000-\u0020\u007F-\u00A0\u1680\u2000-\u200F\u2028-\u202F\u205F\u3000\uFEFF]/

/**
 * An endpoint's `url`, as given: an absolute http: or https: URL to Node's URL parser, at most
 * MAX_URL_LENGTH characters, without user info or fragment, whose host is not refused
 * (private_address). Returns it unchanged, or undefined after adding its error.
 */
export function checkWebhookUrl(
  value: unknown,
  refusedHost: RefusedHost,
  errors: FieldErrors,
): string | undefined {
  const problem = findUrlProblem(value, refusedHost)
  if (problem === undefined) return value as string
  errors.add('/url', problem.code, problem.message)
  return undefined
}

function findUrlProblem(
  value: unknown,
  refusedHost: RefusedHost,
): { code: string; message: string } | undefined {
  // A JSON body holds no undefined: an absent url never gets here (validate-webhook.ts).
  if (value === null || value === '') return { code: 'required', message: 'url is required.' }
  if (typeof value !== 'string') return { code: 'invalid_type', message: 'url must be a string.' }
  if (hasLoneSurrogate(value)) return ILL_FORMED
  if (countCodePoints(value) > MAX_URL_LENGTH)
    return { code: 'too_long', message: `url must have at most ${MAX_URL_LENGTH} characters.` }
  if (NOT_IN_URL.test(value)) {
    const message = 'url must not contain white space or control characters.'
    return { code: 'invalid_characters', message }
  }
  const url = parseUrl(value)
  if (url === undefined || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
    const message = 'url must be an absolute http: or https: URL.'
    return { code: 'invalid_format', message }
  }
  if (url.username !== '' || url.password !== '')
    return { code: 'invalid_format', message: 'url must not hold user info (user:password@).' }
  // `https://x/#` has an empty hash: the character itself says there is a fragment.
  if (value.includes('#'))
    return { code: 'invalid_format', message: 'url must not have a fragment (#...).' }
  if (refusedHost(url)) {
    const message =
      'url names a host deliveries may not reach (a loopback, private, link-local or other non-global address, or localhost); WEBHOOK_ALLOW_NETWORKS can allow a network.'
    return { code: 'private_address', message }
  }
  return undefined
}

/** URL.parse is Node 22's; the floor is Node 20. */
function parseUrl(text: string): URL | undefined {
  try {
    return new URL(text)
  } catch {
    return undefined
  }
}
