/**
 * Every stable error code of the service. Callers branch on `code`, never on messages; the HTTP
 * layer maps each code to its status and title in one table (http/problem.ts), which must cover
 * this whole list.
 */
export const SERVICE_ERROR_CODES = [
  'bad_request',
  'token_missing',
  'token_invalid',
  'token_expired',
  'token_revoked',
  'insufficient_scope',
  'subject_suspended',
  'subject_deleted',
  'not_found',
  'method_not_allowed',
  'duplicate_email',
  'duplicate_id',
  'invalid_transition',
  'import_in_progress',
  'version_exhausted',
  'request_timeout',
  'precondition_failed',
  'cursor_expired',
  'payload_too_large',
  'unsupported_media_type',
  'validation_failed',
  'headers_too_large',
  'expectation_failed',
  'rate_limited',
  'invalid_idempotency_key',
  'idempotency_key_in_use',
  'idempotency_key_reused',
  'webhook_limit_reached',
  'internal',
  'maintenance',
  'overloaded',
  'starting',
  'shutting_down',
  // A store that cannot take the request (a refused disk, a database that does not answer, a
  // store turned read-only): the client may try again later.
  'storage_unavailable',
] as const

export type ErrorCode = (typeof SERVICE_ERROR_CODES)[number]

/** One entry of a validation failure: which field, why (a stable code) and a message for people. */
export interface FieldError {
  pointer: string
  code: string
  message: string
}

export interface ServiceErrorOptions {
  /** Field errors of a validation_failed. */
  errors?: readonly FieldError[] | undefined
  /** When the client may try again, in seconds (a storage fault). */
  retryAfterSeconds?: number | undefined
  /** The underlying fault, kept for the log and never shown. */
  cause?: unknown
  /**
   * Set when the service cannot tell whether the refused change was made (a write-ahead log's
   * sync failed: its record may be on disk). Unset, an error means nothing was changed.
   */
  outcome?: ChangeOutcome | undefined
}

/** What a failed write may have left behind: `unknown` means the change may appear later. */
export type ChangeOutcome = 'unknown'

/** The one error type below the HTTP layer: a stable code and a detail for people. */
export class ServiceError extends Error {
  readonly code: ErrorCode
  readonly detail: string
  readonly errors: readonly FieldError[] | undefined
  readonly retryAfterSeconds: number | undefined
  readonly outcome: ChangeOutcome | undefined

  constructor(code: ErrorCode, detail: string, options: ServiceErrorOptions = {}) {
    // A ServiceError is an answer, not a fault: a stack trace would only cost time on every 4xx.
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super(detail, options.cause === undefined ? undefined : { cause: options.cause })
    Error.stackTraceLimit = limit
    this.name = 'ServiceError'
    this.code = code
    this.detail = detail
    this.errors = options.errors
    this.retryAfterSeconds = options.retryAfterSeconds
    this.outcome = options.outcome
  }
}

export function isServiceError(value: unknown): value is ServiceError {
  return value instanceof ServiceError
}

/**
 * A fault of the service's own code (a broken invariant, a store used before it is open): an
 * `internal` error whose detail says nothing more, with the reason kept as its cause for the log.
 */
export function internalFault(reason: string): ServiceError {
  return new ServiceError('internal', 'The server could not complete the request.', {
    cause: new Error(reason),
  })
}

/**
 * The service cannot start as it is set up (its data directory is another process's, a driver it
 * needs is missing): the message is for the operator and says what to do; no stack is shown.
 */
export class StartError extends Error {
  override name = 'StartError'
}
