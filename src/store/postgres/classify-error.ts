import { ServiceError } from '../../domain/errors.js'

/**
 * What a failure of the `pg` driver means, by its SQLSTATE class (STYLE rule 15):
 * - `input`: class 22 (data exception: a value the database cannot take, such as a NUL or a
 *   number out of range) or 23 (integrity constraint): the client's input. The database answered,
 *   so it never counts against readiness.
 * - `unavailable`: everything else, as it always was, and among it what surely is the service's
 *   own resource failing: class 08 (connection), 53 (insufficient resources), 57 (operator
 *   intervention, a statement time-out), a socket error or a time-out without a SQLSTATE.
 * The unique violations that have a meaning of their own (duplicate_email) are told apart by the
 * caller before this is asked.
 */
export type PgFailure = 'input' | 'unavailable'

export function classifyPgError(error: unknown): PgFailure {
  const code = sqlState(error)
  if (code !== undefined && (code.startsWith('22') || code.startsWith('23'))) return 'input'
  return 'unavailable'
}

/**
 * The SQLSTATE of an error the server sent, or undefined. Only the server's errors carry a
 * `severity`: a socket error's `code` is an errno (EPIPE has five letters too).
 */
function sqlState(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined
  const { code, severity } = error as { code?: unknown; severity?: unknown }
  return typeof code === 'string' && typeof severity === 'string' ? code : undefined
}

/**
 * The 400 for input the database refused. No field can be named reliably from a driver's error,
 * so it names what PostgreSQL names (a column or a constraint); the inputs known to be refused
 * (a NUL, a version out of range) are caught before the query with the field named, and this is
 * the net under them.
 */
export function toInputError(error: unknown): ServiceError {
  const found = error as { code?: unknown; column?: unknown; constraint?: unknown }
  const named =
    typeof found.constraint === 'string'
      ? `, constraint ${found.constraint}`
      : typeof found.column === 'string'
        ? `, column ${found.column}`
        : ''
  return new ServiceError(
    'bad_request',
    `The database refused a value of this request (SQLSTATE ${String(found.code)}${named}), so nothing was changed.`,
    { cause: error },
  )
}

const UNIQUE_VIOLATION = '23505'

/** A unique violation of this constraint (one the store gives a meaning of its own). */
export function isUniqueViolation(error: unknown, constraint: string): boolean {
  const found = error as { code?: unknown; constraint?: unknown } | null
  return found?.code === UNIQUE_VIOLATION && found.constraint === constraint
}

/** The database did not answer or refused the request: the client may retry, nothing changed. */
export function databaseUnavailable(cause: unknown): ServiceError {
  return new ServiceError(
    'storage_unavailable',
    'The database did not answer or refused the request, so nothing was changed. Try again later.',
    { retryAfterSeconds: 5, cause },
  )
}

/**
 * A statement cut, or refused, because the store is closing (the service stops): no fault of the
 * database, and no answer waits for it (its request was answered or cut first).
 */
export function storeClosing(cause: unknown): ServiceError {
  return new ServiceError('shutting_down', 'The service is shutting down.', {
    retryAfterSeconds: 5,
    cause,
  })
}

/**
 * Whether a COMMIT that failed so may still have been made. The server refuses a commit with an
 * error of class 23 (a deferred constraint) or 40 (serialization, deadlock) and rolls back; any
 * other failure (the connection lost, the server shutting down, no answer at all) may come after
 * the commit record was written.
 */
export function commitMayHaveLanded(error: unknown): boolean {
  const code = sqlState(error)
  return code === undefined || !(code.startsWith('23') || code.startsWith('40'))
}

/**
 * A write the server refused because the database takes none (read_only_sql_transaction: a
 * standby, default_transaction_read_only): it answered, and will refuse every write.
 */
export function isReadOnlyRefusal(error: unknown): boolean {
  return sqlState(error) === '25006'
}

/**
 * The driver gave up waiting for a statement's answer (its `query_timeout`): the statement may
 * still run on the server, and the connection answers nothing else before it. pg says so only in
 * its message, so that message is matched here, where the driver's errors are classified.
 */
export function isQueryTimeout(error: unknown): boolean {
  return (
    error instanceof Error &&
    sqlState(error) === undefined &&
    error.message === 'Query read timeout'
  )
}

/** The database did not answer a COMMIT: the change may have been made, or not. */
export function commitOutcomeUnknown(cause: unknown): ServiceError {
  return new ServiceError(
    'storage_unavailable',
    'The database did not answer the commit of this change, so whether it was made is unknown. Read the resource back, or send the request again with the same Idempotency-Key, before anything else.',
    { retryAfterSeconds: 5, cause, outcome: 'unknown' },
  )
}

/** A change lost to other replicas too many times in a row. */
export function contention(id: string): ServiceError {
  return new ServiceError(
    'storage_unavailable',
    `User ${id} changed too often at once to apply this change; try again.`,
    {
      retryAfterSeconds: 1,
    },
  )
}

/**
 * What a log line may say of a driver's fault: its code (a SQLSTATE or an errno), never its
 * message, which may quote a client's data.
 */
export function pgFault(error: unknown): Record<string, string> {
  const code =
    typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined
  return { code: typeof code === 'string' ? code : 'none' }
}
