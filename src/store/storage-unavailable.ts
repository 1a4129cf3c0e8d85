import { type ChangeOutcome, ServiceError } from '../domain/errors.js'
import type { StoreHealth } from './store.js'
import type { WriteError } from './write-error.js'

/** The one answer to a write's storage fault: storage_unavailable, and a detail that says what was kept. */
export function storageUnavailable(
  cause: WriteError | undefined,
  health: StoreHealth,
  outcome?: ChangeOutcome,
): ServiceError {
  const readOnly = 'the service takes no more writes until it is restarted; reads still work.'
  let detail =
    'Storage refused the write (it is full or read-only), so nothing was changed. Try again later.'
  if (cause === undefined && health.state === 'read_only')
    detail = `Storage failed earlier: ${readOnly}`
  else if (cause === undefined)
    detail = `Storage cannot take writes now (${health.reason ?? 'it is full or read-only'}); new writes are tried as they come.`
  else if (cause.applied)
    detail = `The change was written but could not be made durable, and ${readOnly} Read it back to see what is kept.`
  else if (outcome === 'unknown')
    detail = `Storage failed while the change was being made durable, so whether it was made is unknown: it is not shown now, but may be after a restart. Read the user back before trying again; ${readOnly}`
  else if (health.state === 'read_only')
    detail = `Storage failed and nothing was changed; ${readOnly}`
  return new ServiceError('storage_unavailable', detail, { retryAfterSeconds: 30, cause, outcome })
}

/**
 * Throws for a read of the store's own files that failed (a journal of kept keys it may no longer
 * read): a fault of the service's storage, not of the request, and nothing was done.
 */
export function throwUnreadable(cause: unknown): never {
  throw new ServiceError(
    'storage_unavailable',
    'Storage could not be read, so nothing was done. Try again later.',
    { retryAfterSeconds: 30, cause },
  )
}
