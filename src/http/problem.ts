import {
  type ChangeOutcome,
  type ErrorCode,
  type FieldError,
  ServiceError,
} from '../domain/errors.js'

/**
 * The one table of error codes: each stable `code` owns its HTTP status and title, so the two can
 * never drift apart. It covers every code of the domain's list (the type says so).
 */
export const ERROR_CODES = {
  bad_request: { status: 400, title: 'Bad request' },
  token_missing: { status: 401, title: 'Authentication required' },
  token_invalid: { status: 401, title: 'Invalid token' },
  token_expired: { status: 401, title: 'Token expired' },
  token_revoked: { status: 401, title: 'Token revoked' },
  insufficient_scope: { status: 403, title: 'Insufficient scope' },
  subject_suspended: { status: 403, title: 'Subject suspended' },
  subject_deleted: { status: 403, title: 'Subject deleted' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  duplicate_email: { status: 409, title: 'Email already in use' },
  duplicate_id: { status: 409, title: 'Id already in use' },
  invalid_transition: { status: 409, title: 'Invalid state transition' },
  import_in_progress: { status: 409, title: 'Import in progress' },
  version_exhausted: { status: 409, title: 'Version exhausted' },
  request_timeout: { status: 408, title: 'Request timeout' },
  precondition_failed: { status: 412, title: 'Precondition failed' },
  cursor_expired: { status: 410, title: 'Cursor expired' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  validation_failed: { status: 422, title: 'Validation failed' },
  headers_too_large: { status: 431, title: 'Request header fields too large' },
  expectation_failed: { status: 417, title: 'Expectation failed' },
  rate_limited: { status: 429, title: 'Too many requests' },
  invalid_idempotency_key: { status: 400, title: 'Invalid Idempotency-Key' },
  idempotency_key_in_use: { status: 409, title: 'Idempotency-Key in use' },
  idempotency_key_reused: { status: 422, title: 'Idempotency-Key reused' },
  webhook_limit_reached: { status: 409, title: 'Webhook limit reached' },
  internal: { status: 500, title: 'Internal server error' },
  maintenance: { status: 503, title: 'Down for maintenance' },
  overloaded: { status: 503, title: 'Overloaded' },
  starting: { status: 503, title: 'Starting' },
  shutting_down: { status: 503, title: 'Shutting down' },
  storage_unavailable: { status: 503, title: 'Storage unavailable' },
} as const satisfies Record<ErrorCode, { status: number; title: string }>

export type { ErrorCode, FieldError }

export interface HttpErrorOptions {
  /** Field errors of a 422. */
  errors?: readonly FieldError[] | undefined
  /** Headers the answer must carry (`Allow`, `WWW-Authenticate`, `Retry-After`). */
  headers?: Readonly<Record<string, string>>
  /** The underlying fault, kept for the log and never sent. */
  cause?: unknown
  /** The `outcome` member: `unknown` when the refused change may still have been made. */
  outcome?: ChangeOutcome | undefined
  /** The `violated-policies` member of a 429: the rate-limit policies spent. */
  violatedPolicies?: readonly string[] | undefined
}

/** A ServiceError as an HTTP answer: its status and title from the table, and its headers. */
export class HttpError extends ServiceError {
  readonly status: number
  readonly title: string
  readonly headers: Readonly<Record<string, string>>
  readonly violatedPolicies: readonly string[] | undefined

  constructor(code: ErrorCode, detail: string, options: HttpErrorOptions = {}) {
    const retryAfter = options.headers?.['retry-after']
    super(code, detail, {
      errors: options.errors,
      cause: options.cause,
      outcome: options.outcome,
      retryAfterSeconds: retryAfter === undefined ? undefined : Number(retryAfter),
    })
    this.name = 'HttpError'
    this.status = ERROR_CODES[code].status
    this.title = ERROR_CODES[code].title
    this.headers = options.headers ?? {}
    this.violatedPolicies = options.violatedPolicies
  }
}

/** The members of a problem+json body beyond the standard ones, from the error alone. */
export function problemExtras(error: HttpError): {
  errors?: readonly FieldError[]
  outcome?: ChangeOutcome
  'violated-policies'?: readonly string[]
} {
  return {
    ...(error.errors === undefined ? {} : { errors: error.errors }),
    ...(error.outcome === undefined ? {} : { outcome: error.outcome }),
    ...(error.violatedPolicies === undefined
      ? {}
      : { 'violated-policies': error.violatedPolicies }),
  }
}

export function isHttpError(value: unknown): value is HttpError {
  return value instanceof HttpError
}

/**
 * Turns anything thrown into an HttpError: a ServiceError keeps its code, detail, field errors and
 * cause (its retry hint becomes Retry-After); an unknown fault becomes a bare 500.
 */
export function toHttpError(value: unknown): HttpError {
  if (value instanceof HttpError) return value
  if (value instanceof ServiceError) {
    return new HttpError(value.code, value.detail, {
      errors: value.errors,
      cause: value.cause,
      outcome: value.outcome,
      ...(value.retryAfterSeconds === undefined
        ? {}
        : { headers: { 'retry-after': String(value.retryAfterSeconds) } }),
    })
  }
  return new HttpError('internal', 'The server could not complete the request.', { cause: value })
}
