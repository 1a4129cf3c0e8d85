import { ServiceError } from '../domain/errors.js'
import type { ChangeContext } from '../domain/event.js'
import { repeatedName, repeatedNameDetail } from '../domain/json-text.js'
import { keepKeyOrder } from '../domain/metadata.js'
import { toEmailKey, toRecord, type User } from '../domain/user.js'
import type { IdGenerator } from '../domain/uuid7.js'
import { type FieldError, type HttpError, toHttpError } from '../http/problem.js'
import type { Store } from '../store/store.js'
import { type NOT_UTF8, type SplitLine, TOO_LONG } from '../users/import-lines.js'
import { type ImportedUser, toImportedUser } from '../users/import-user.js'
import { LineOrder } from './line-order.js'

/**
 * An import line longer than this gets a 413 result of its own; its bytes are never kept. Every
 * exported user fits: the largest the rules allow is about 100 KB (32 metadata values of 512
 * control characters, which JSON writes in 6 bytes each), past the 64 KiB of a request body.
 */
export const MAX_LINE_BYTES = 128 * 1024

/** One result line of an import. */
export interface LineResult {
  readonly line: number
  readonly status: number
  readonly id?: string
  readonly code?: string
  readonly detail?: string
  readonly errors?: readonly FieldError[]
}

export interface LineImporterOptions {
  store: Store
  now: () => number
  newId: IdGenerator
  /** Throws to refuse a write (maintenance), as for every other write. */
  writeGate: () => void
}

/** Who hears of an import line's storage fault, and of each user stored (the storage fault log). */
export interface LineReport {
  fault(error: HttpError, line: number): void
  stored(): void
}

/** Stores the user of one import line, or says why not; it never throws. */
export type LineImporter = (
  line: number,
  text: SplitLine,
  context: ChangeContext,
  report?: LineReport,
) => Promise<LineResult>

export function createLineImporter(options: LineImporterOptions): LineImporter {
  const { store, now, newId, writeGate } = options
  // Lines that name one id or one email are stored in input order (the first is 201, a later one
  // 200 or 409), though up to the import's concurrency run at once; others never wait for them.
  const order = new LineOrder()

  /** 200 when the id already holds exactly this user, 409 when it holds (or held) another. */
  const settledResult = async (line: number, user: User): Promise<LineResult | undefined> => {
    const current = await store.get(user.id)
    if (current !== undefined) {
      if (current.json === toRecord(user).json) return { line, status: 200, id: user.id }
      return {
        line,
        status: 409,
        id: user.id,
        code: 'duplicate_id',
        detail: 'Another user with this id is stored.',
      }
    }
    if (await store.isDeleted(user.id)) {
      return {
        line,
        status: 409,
        id: user.id,
        code: 'duplicate_id',
        detail: 'A user with this id was deleted; ids are never reused.',
      }
    }
    return undefined
  }

  return async (line, text, context, report) => {
    if (typeof text !== 'string') return refusedLine(line, text)
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      return { line, status: 400, code: 'bad_request', detail: 'The line is not valid JSON.' }
    }
    const repeated = repeatedName(text)
    if (repeated !== undefined)
      return { line, status: 400, code: 'bad_request', detail: repeatedNameDetail(repeated) }
    keepKeyOrder(text, value, ['metadata'])
    let imported: ImportedUser
    try {
      imported = toImportedUser(value, newId, now)
    } catch (error) {
      return toFailureResult(line, error)
    }
    const { user, exported } = imported
    return order.run([`id ${user.id}`, `email ${toEmailKey(user.email)}`], async () => {
      try {
        if (exported) {
          const settled = await settledResult(line, user)
          if (settled !== undefined) return settled
        }
        await store.create(user, writeGate, context)
        report?.stored()
        return { line, status: 201, id: user.id }
      } catch (error) {
        // The same id written meanwhile (by another import or a client): judge it against what is stored now.
        if (!(error instanceof ServiceError) || error.code === 'duplicate_id') {
          const settled = await settledResult(line, user).catch(() => undefined)
          if (settled !== undefined) return settled
        }
        if (error instanceof ServiceError && error.code === 'storage_unavailable')
          report?.fault(toHttpError(error), line)
        return toFailureResult(line, error)
      }
    })
  }
}

function refusedLine(line: number, why: typeof TOO_LONG | typeof NOT_UTF8): LineResult {
  return why === TOO_LONG
    ? {
        line,
        status: 413,
        code: 'payload_too_large',
        detail: `The line is longer than ${MAX_LINE_BYTES} bytes.`,
      }
    : { line, status: 400, code: 'bad_request', detail: 'The line is not valid UTF-8.' }
}

/** The result line of a line that failed: its HttpError as it is, anything else a bare 500. */
export function toFailureResult(line: number, error: unknown): LineResult {
  if (!(error instanceof ServiceError) || error.code === 'internal') {
    return { line, status: 500, code: 'internal', detail: 'The user could not be imported.' }
  }
  return {
    line,
    status: toHttpError(error).status,
    code: error.code,
    detail: error.detail,
    ...(error.errors === undefined ? {} : { errors: error.errors }),
  }
}
