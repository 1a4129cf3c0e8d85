import { keepKeyOrder } from '../../domain/metadata.js'
import {
  EMPTY_METADATA,
  type Metadata,
  recordWithJson,
  type User,
  type UserRecord,
  type UserStatus,
} from '../../domain/user.js'
import { toMetadata } from './stored-files.js'

// A JSON string as JSON.stringify writes it: no raw control character, quote or lone backslash.
const STRING = String.raw`"(?:[^"\\\u0000-\u001f]|\\.)*"`
const TIME = String.raw`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z`
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'

/**
 * A user line exactly as toRecord writes it (the fields in its order, no space, a version with no
 * sign, fraction or exponent), then its newline; sticky, so that one match per line walks the
 * snapshot's text without splitting it first.
 */
const USER_LINE = new RegExp(
  String.raw`\{"id":"(${UUID})","email":(${STRING}),"name":(${STRING}),` +
    String.raw`"status":"(pending|active|suspended)","metadata":(\{\}|\{${STRING}:${STRING}(?:,${STRING}:${STRING})*\}),` +
    String.raw`"createdAt":"(${TIME})","updatedAt":"(${TIME})","version":([1-9]\d{0,15})` +
    String.raw`(?:,"tokensValidAfter":"(${TIME})")?\}\n`,
  'y',
)

/** One string per status, shared by every user loaded. */
const STATUS: Readonly<Record<string, UserStatus>> = {
  pending: 'pending',
  active: 'active',
  suspended: 'suspended',
}

/**
 * The user lines of a snapshot's text, one record at a time. A line is taken only when it is laid
 * out as toRecord writes a valid user: whatever it accepts, parseStoredUser accepts too, as the
 * same user, and the line is the JSON toRecord writes for it (the record keeps the line as its
 * JSON), up to how a string's characters are escaped. Anything else (another field order, a
 * space, a field the store does not write, a value of another type) ends the walk, and the caller
 * reads the user files instead. One match per line, no JSON.parse unless a string holds an escape
 * or metadata: several times cheaper than a JSON.parse and a user file's checks per line, which a
 * start from a snapshot of 100,000 users makes 100,000 of.
 */
export class UserLines {
  readonly #text: string
  #at: number

  constructor(text: string, at = 0) {
    this.#text = text
    this.#at = at
  }

  /** Where the next line starts. */
  get at(): number {
    return this.#at
  }

  /** The record of the next line; undefined (and `at` unmoved) when it is not a user line. */
  next(): UserRecord | undefined {
    USER_LINE.lastIndex = this.#at
    const match = USER_LINE.exec(this.#text)
    if (match === null) return undefined
    const id = match[1] ?? ''
    const createdAt = match[6] ?? ''
    const updatedAt = match[7] ?? ''
    const tokensValidAfter = match[9]
    const status = STATUS[match[4] ?? '']
    const version = Number(match[8])
    const email = jsonString(match[2] ?? '')
    const name = jsonString(match[3] ?? '')
    const metadataText = match[5]
    const metadata = metadataText === '{}' ? EMPTY_METADATA : jsonMetadata(metadataText ?? '')
    if (status === undefined || !Number.isSafeInteger(version)) return undefined
    if (email === undefined || name === undefined || metadata === undefined) return undefined
    // Equal time stamps share one string, as parseStoredUser's do.
    const updated = updatedAt === createdAt ? createdAt : updatedAt
    const fields = { id, email, name, status, metadata, createdAt, updatedAt: updated, version }
    const user: User = tokensValidAfter === undefined ? fields : { ...fields, tokensValidAfter }
    const end = USER_LINE.lastIndex
    const record = recordWithJson(user, this.#text.slice(this.#at, end - 1))
    this.#at = end
    return record
  }
}

/** A JSON string's value: its characters as they are, unless it holds an escape. */
function jsonString(text: string): string | undefined {
  if (!text.includes('\\')) return text.slice(1, -1)
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === 'string' ? value : undefined
  } catch {
    return undefined
  }
}

function jsonMetadata(text: string): Metadata | undefined {
  try {
    const value: unknown = JSON.parse(text)
    keepKeyOrder(text, value, [])
    return toMetadata(value)
  } catch {
    return undefined
  }
}
