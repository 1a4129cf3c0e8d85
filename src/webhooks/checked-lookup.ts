/**
 * The `lookup` a webhook attempt connects with: the host is resolved once (host-resolution.ts),
 * every address checked against the address policy, and only the first allowed one handed to the
 * socket, so that the address connected to is the address checked (a second resolution could
 * answer differently: DNS rebinding).
 */
import type { LookupFunction } from 'node:net'

import { type AllowList, isRefusedAddress } from './address-policy.js'
import { resolveHost } from './host-resolution.js'

/** How the resolution of one attempt ended, for telling its failures apart. */
export interface LookupState {
  outcome: 'pending' | 'resolved' | 'dns_failed' | 'private_address'
  /** The address connected to, once resolved. */
  address?: string
}

/** No resolved address is allowed: nothing is sent. */
export class RefusedAddressError extends Error {
  override name = 'RefusedAddressError'
  readonly code = 'EWEBHOOKREFUSED'
}

/**
 * A lookup for one attempt that records its outcome in `state`; once `signal` aborts (the attempt
 * ended), its resolution is abandoned and the socket, already destroyed, hears nothing.
 */
export function createCheckedLookup(
  allow: AllowList,
  state: LookupState,
  signal: AbortSignal,
): LookupFunction {
  return (hostname, options, callback) => {
    resolveHost(hostname, signal).then(
      (addresses) => {
        const family = familyOf(options.family)
        const allowed = addresses.find(
          (candidate) =>
            (family === 0 || candidate.family === family) &&
            !isRefusedAddress(candidate.address, allow),
        )
        if (allowed === undefined) {
          state.outcome = 'private_address'
          callback(new RefusedAddressError(`no address of ${hostname} may be reached`), [])
          return
        }
        state.outcome = 'resolved'
        state.address = allowed.address
        // net.connect asks for every address (to race the families) or for one: either way it
        // gets only the one checked.
        if (options.all === true) callback(null, [allowed])
        else callback(null, allowed.address, allowed.family)
      },
      (error: NodeJS.ErrnoException) => {
        if (signal.aborted) return
        state.outcome = 'dns_failed'
        callback(error, [])
      },
    )
  }
}

function familyOf(family: number | 'IPv4' | 'IPv6' | undefined): number {
  if (family === 'IPv4') return 4
  if (family === 'IPv6') return 6
  return family ?? 0
}
