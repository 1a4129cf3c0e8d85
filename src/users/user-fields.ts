import { MAX_USER_VERSION, USER_STATUSES } from '../domain/user.js'

export { MAX_USER_VERSION, MAX_VERSION } from '../domain/user.js'

/**
 * The rules of each user field, as data: validation interprets them and the OpenAPI schema is
 * built from them, so the two cannot disagree. Lengths count code points, after trimming.
 */
export interface FieldSpec {
  readonly type: 'string' | 'integer' | 'metadata'
  /** Output-only fields are set by the server; a client may only echo their stored value. */
  readonly access: 'writable' | 'output'
  readonly required: boolean
  readonly description: string
  readonly trim?: boolean
  readonly format?: 'email' | 'uuid' | 'date-time'
  readonly minLength?: number
  readonly maxLength?: number
  /** Integers: the smallest and largest value. */
  readonly minimum?: number
  readonly maximum?: number
  /** An ECMAScript pattern (with the `u` flag) the whole value must match. */
  readonly pattern?: string
  /**
   * At least one code point that is neither White_Space nor Default_Ignorable_Code_Point, so that
   * a value cannot be blank to the eye (zero-width spaces, joiners, fillers).
   */
  readonly requireVisible?: boolean
  readonly enum?: readonly string[]
  /** Email: the longest local part. */
  readonly maxLocalLength?: number
  /** Metadata: at most this many keys, each matching keyPattern, each value a short string. */
  readonly maxKeys?: number
  readonly keyPattern?: string
  readonly maxValueLength?: number
  /** An output field a user has only once it was set (the schema does not require it). */
  readonly optional?: boolean
  /** Said in the read-only error, for fields that have their own way of changing. */
  readonly changeHint?: string
  readonly example: unknown
}

export const USER_FIELDS = {
  id: {
    type: 'string',
    access: 'output',
    required: false,
    format: 'uuid',
    description:
      'Assigned by the server at creation: a lower-case UUIDv7, so ids sort by creation time.',
    example: '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b',
  },
  email: {
    type: 'string',
    access: 'writable',
    required: true,
    trim: true,
    format: 'email',
    minLength: 3,
    maxLength: 254,
    maxLocalLength: 64,
    description:
      'local@domain.tld (the domain has a dot, no spaces; the local part and each ' +
      'domain label hold a visible character). Unique across users, compared ' +
      'case-insensitively; stored as given.',
    example: 'ada@example.com',
  },
  name: {
    type: 'string',
    access: 'writable',
    required: true,
    trim: true,
    minLength: 1,
    maxLength: 200,
    pattern: '^[^\\u0000-\\u001F\\u007F-\\u009F]*$',
    requireVisible: true,
    description:
      '1-200 characters (code points) after trimming, without control characters ' +
      '(C0, DEL or C1), and not only white space or zero-width characters.',
    example: 'Ada Lovelace',
  },
  status: {
    type: 'string',
    access: 'output',
    required: false,
    enum: USER_STATUSES,
    changeHint: 'change it with POST /users/{id}:activate or POST /users/{id}:suspend',
    description: 'pending when created; changed only by the :activate and :suspend methods.',
    example: 'pending',
  },
  metadata: {
    type: 'metadata',
    access: 'writable',
    required: false,
    maxKeys: 32,
    keyPattern: '^[A-Za-z0-9_.-]{1,64}$',
    maxValueLength: 512,
    description:
      'Up to 32 keys of 1-64 characters of [A-Za-z0-9_.-], each with a string of at most 512 characters, kept in the order sent (a reorder is a change). Defaults to {}.',
    example: { team: 'analytics' },
  },
  createdAt: {
    type: 'string',
    access: 'output',
    required: false,
    format: 'date-time',
    description: 'When the user was created (RFC 3339, UTC, milliseconds).',
    example: '2026-11-21T13:47:00.000Z',
  },
  updatedAt: {
    type: 'string',
    access: 'output',
    required: false,
    format: 'date-time',
    description: 'When a change last altered the stored user.',
    example: '2026-11-21T13:47:00.000Z',
  },
  version: {
    type: 'integer',
    access: 'output',
    required: false,
    minimum: 1,
    maximum: MAX_USER_VERSION,
    description:
      '1 at creation, +1 on every change that alters the stored user; the ETag follows it. ' +
      'A user at the highest version (2^53 - 2) cannot change any more (409 version_exhausted) ' +
      'but can be deleted: its user.deleted event takes the last version, 2^53 - 1.',
    example: 1,
  },
  tokensValidAfter: {
    type: 'string',
    access: 'output',
    required: false,
    optional: true,
    format: 'date-time',
    changeHint: 'change it with POST /users/{id}:revokeTokens',
    description:
      "Absent until the user's first revocation (POST /users/{id}:revokeTokens): tokens whose " +
      'sub is this user and whose iat is before it, or that have no iat, are refused with 401 ' +
      'token_revoked. A whole second (RFC 3339, UTC, .000).',
    example: '2026-11-21T13:48:01.000Z',
  },
} as const satisfies Record<string, FieldSpec>

export type FieldName = keyof typeof USER_FIELDS

export const FIELD_NAMES = Object.keys(USER_FIELDS) as FieldName[]
export const WRITABLE_FIELDS = FIELD_NAMES.filter((name) => USER_FIELDS[name].access === 'writable')
export const OUTPUT_FIELDS = FIELD_NAMES.filter((name) => USER_FIELDS[name].access === 'output')

export function isFieldName(name: string): name is FieldName {
  return Object.hasOwn(USER_FIELDS, name)
}
