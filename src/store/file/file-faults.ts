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

/**
 * A sweep of expired idempotency keys that failed: a failed fdatasync of a segment whose keys it
 * blanked turns the store read-only, as a checkpoint's does (the kernel may have dropped what it
 * held for the event log); any other failure is tried again by the next sweep.
 */
export function keySweepFailed(
  logger: Logger,
  dataDir: string,
  error: unknown,
  turnReadOnly: (reason: string) => void,
): void {
  const fields = faultFields(error, dataDir)
  if (!(error instanceof WriteError && error.fsyncFailed)) {
    logger.warn('could not delete expired idempotency keys', fields)
    return
  }
  turnReadOnly(`blanking expired idempotency keys in the event log failed at ${fields.step}`)
  logger.error('blanking expired idempotency keys failed: the store turned read-only', fields)
}

/**
 * A failed fsync of a checkpoint turns the store read-only, since the kernel may have dropped the
 * changes it held for these files; any other failure (a full disk) waits for the next one.
 */
export function checkpointFailed(
  logger: Logger,
  dataDir: string,
  error: unknown,
  turnReadOnly: (reason: string) => void,
): void {
  const fields = faultFields(error, dataDir)
  if (error instanceof WriteError && !error.fsyncFailed && fields.code !== 'EIO') {
    // A full or read-only disk: the log still holds every change; the next one tries again.
    logger.warn('a checkpoint failed; the next one tries again', fields)
    return
  }
  turnReadOnly(`a checkpoint failed at ${fields.step} (${fields.code ?? 'no errno'})`)
  logger.error('a checkpoint failed: the store turned read-only', fields)
}
