import type { ChangeEvent } from '../../domain/event.js'
import type { Logger } from '../../log/logger.js'
import { WriteError } from '../write-error.js'

/** The step and errno of a failure, as the log tells them. */
function faultFields(error: unknown, dataDir: string) {
  const step = error instanceof WriteError ? error.step : 'write'
  const code = error instanceof WriteError ? error.code : undefined
  return { step, code, error: String(error), dataDir }
}

/**
 * A committed change whose file could not be renamed or removed (its event is durable): the
 * checkpoint stays behind that event (file-steps.ts), so that the replay at the next start
 * writes the file; the change is answered as made (ChangeCommit). Only the log tells of it.
 */
export function logUnwritten(
  logger: Logger,
  dataDir: string,
  event: ChangeEvent,
  error: unknown,
): void {
  const { step, code, error: text } = faultFields(error, dataDir)
  logger.error('a committed change could not be written to its file; the log keeps it', {
    requestId: event.requestId,
    userId: event.userId,
    event: event.id,
    step,
    code,
    error: text,
    dataDir,
  })
}

/** What the service may do after a write of its own in the background failed. */
export interface BackgroundFault {
  readonly logger: Logger
  readonly dataDir: string
  readonly turnReadOnly: (reason: string) => void
  /** Checkpoints failed and tried again since the last that succeeded (warned of once). */
  checkpointRetries: number
}

export function backgroundFault(
  logger: Logger,
  dataDir: string,
  turnReadOnly: (reason: string) => void,
): BackgroundFault {
  return { logger, dataDir, turnReadOnly, checkpointRetries: 0 }
}

/**
 * A write in the background failed: when `retried` names a warning, the next attempt tries again;
 * otherwise the store turns read-only (the kernel may have dropped what it held for its files),
 * logged at `error` as `<what>: the store turned read-only`.
 */
function backgroundWriteFailed(
  fault: BackgroundFault,
  error: unknown,
  what: string,
  retried: string | undefined,
): void {
  const fields = faultFields(error, fault.dataDir)
  if (retried !== undefined) {
    fault.logger.warn(retried, fields)
    return
  }
  fault.turnReadOnly(`${what} at ${fields.step} (${fields.code ?? 'no errno'})`)
  fault.logger.error(`${what}: the store turned read-only`, fields)
}

/**
 * A sweep of expired idempotency keys that failed: a failed fdatasync of a segment whose keys it
 * blanked turns the store read-only, as a checkpoint's does; any other failure is tried again by
 * the next sweep.
 */
export function keySweepFailed(fault: BackgroundFault, error: unknown): void {
  const synced = !(error instanceof WriteError && error.fsyncFailed)
  const retried = synced ? 'could not delete expired idempotency keys' : undefined
  backgroundWriteFailed(fault, error, 'blanking expired idempotency keys failed', retried)
}

/**
 * A failed fsync of a checkpoint turns the store read-only, since the kernel may have dropped the
 * changes it held for these files; any other failure (a full disk) waits for the next one.
 */
export function checkpointFailed(fault: BackgroundFault, error: unknown): void {
  // A full or read-only disk: the log still holds every change; the next one tries again.
  const retryable = error instanceof WriteError && !error.fsyncFailed && error.code !== 'EIO'
  if (!retryable) {
    backgroundWriteFailed(fault, error, 'a checkpoint failed', undefined)
    return
  }
  // Told once for the whole outage, not at every interval: the next line is the recovery's.
  fault.checkpointRetries += 1
  if (fault.checkpointRetries > 1) return
  backgroundWriteFailed(
    fault,
    error,
    'a checkpoint failed',
    'a checkpoint failed; the next ones try again',
  )
}

/** A checkpoint succeeded: after failed ones, the log says so once. */
export function checkpointSucceeded(fault: BackgroundFault): void {
  if (fault.checkpointRetries === 0) return
  fault.logger.info('a checkpoint succeeded again', {
    failedBefore: fault.checkpointRetries,
    dataDir: fault.dataDir,
  })
  fault.checkpointRetries = 0
}
