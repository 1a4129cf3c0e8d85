/**
 * Kept while the upper layers move: the domain's ServiceError and the HTTP layer's table and
 * HttpError, from where they now live (domain/errors.ts, http/problem.ts).
 */
export { ServiceError, isServiceError, SERVICE_ERROR_CODES, type ServiceErrorOptions } from './domain/errors.js'
export {
  ERROR_CODES, HttpError, isHttpError, toHttpError, type ErrorCode, type FieldError, type HttpErrorOptions,
} from './http/problem.js'
